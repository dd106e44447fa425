"""What makes a demo usable by keyboard and screen reader in JupyterLab, beyond what ipywidgets draws.

ipywidgets 8 gives no way to set ARIA attributes from Python, and what it draws falls short of WCAG 2.1 AA:
a slider's handle has no accessible name and announces its slider position (a log slider announces log10 of
its value), Play's buttons are bare icons, ToggleButtons mark the selected option by a CSS class alone, and
JupyterLab takes the arrow keys pressed in a menu or on a slider of an output to move between cells.

So each demo's ``show()`` displays, after the demo, a small script (``front_end``): it finds the demo's box by
its class and, on every change of the demo's DOM (a MutationObserver), sets what the demo declared in its
``Accessible`` description:

- each slider's handle gets its name (``aria-label``) and its real value as shown (``aria-valuetext``,
  "β = 0.5"), and the slider's editable readout a name too;
- each group of toggle buttons becomes a named ``group`` whose buttons say whether they are pressed
  (``aria-pressed``), shown also by a bold, underlined label (not colour alone);
- Play's icon buttons get names;
- each picture gets its text alternative as ``alt``, from the words the demo keeps beside it
  (``FigureImage.text_widget``: ``<p data-describes="<the picture's class>">``), which a screen reader also
  finds where the script does not run;
- each readout of what the plots show is a polite live region (``role="status"``), so a change is announced;
- the keys a control uses (arrows, Page Up/Down, Home, End, Enter, Space) stop at the demo's box, so that
  JupyterLab's shortcuts (ArrowDown: the next cell) leave the demo's controls their keys (the box also carries
  ``data-lm-suppress-shortcuts``, Lumino's own marker); Tab, and Shift+Enter, still leave the demo.

Attributes are only written when they differ, so the observer settles after one pass. The script is
JavaScript output, which JupyterLab runs for a cell the student ran (a trusted output).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

# Dark theme and focus: the demos' own text takes JupyterLab's theme colours (set inline by the demos), and a
# focused control shows a visible ring whatever the theme.
STYLE = """
.lmpolicy-demo :focus-visible { outline: 2px solid var(--jp-brand-color1, #1976d2); outline-offset: 2px; }
.lmpolicy-demo button[aria-pressed="true"] { font-weight: bold; text-decoration: underline; }
"""

SCRIPT = """
(function (spec, css) {
  if (!document.getElementById('lmpolicy-accessible-style')) {
    const style = document.createElement('style');
    style.id = 'lmpolicy-accessible-style';
    style.textContent = css;
    document.head.appendChild(style);
  }
  const set = (element, name, value) => {
    if (value !== null && value !== undefined && element.getAttribute(name) !== value) element.setAttribute(name, value);
  };
  const each = (root, cls, visit) => root.querySelectorAll('.' + cls).forEach(visit);
  function patch(root) {
    set(root, 'data-lm-suppress-shortcuts', 'true');
    set(root, 'role', 'region');
    set(root, 'aria-label', spec.name);
    for (const [cls, slider] of Object.entries(spec.sliders)) each(root, cls, (widget) => {
      const handle = widget.querySelector('.noUi-handle');
      const readout = widget.querySelector('.widget-readout');
      if (!handle) return;
      set(handle, 'aria-label', slider.label);
      if (readout) {
        set(handle, 'aria-valuetext', slider.symbol + ' = ' + readout.textContent.trim());
        set(readout, 'aria-label', slider.label + ': type a value, then Enter');
        set(readout, 'role', 'textbox');
      }
    });
    for (const [cls, label] of Object.entries(spec.groups)) each(root, cls, (widget) => {
      const group = widget.querySelector('.widget-toggle-buttons') || widget;
      set(group, 'role', 'group');
      set(group, 'aria-label', label);
      widget.querySelectorAll('button').forEach((button) =>
        set(button, 'aria-pressed', button.classList.contains('mod-active') ? 'true' : 'false'));
    });
    for (const [cls, label] of Object.entries(spec.selects)) each(root, cls, (widget) => {
      const select = widget.querySelector('select');
      if (select) set(select, 'aria-label', label);
    });
    root.querySelectorAll('.widget-play button').forEach((button) => {
      const icon = button.querySelector('i');
      const kind = icon && Object.keys(spec.play).find((name) => icon.classList.contains('fa-' + name));
      if (kind) set(button, 'aria-label', spec.play[kind]);
    });
    root.querySelectorAll('[data-describes]').forEach((words) => {
      root.querySelectorAll('img.' + words.dataset.describes).forEach((image) => set(image, 'alt', words.textContent));
    });
    for (const cls of spec.live) each(root, cls, (widget) => {
      set(widget, 'role', 'status');
      set(widget, 'aria-live', 'polite');
    });
  }
  // the keys a control uses: they stay with it (JupyterLab would move to another cell on an arrow key)
  const keys = new Set(['ArrowUp', 'ArrowDown', 'ArrowLeft', 'ArrowRight', 'PageUp', 'PageDown', 'Home', 'End',
                        'Enter', ' ']);
  function attach(root) {
    if (root.dataset.lmpolicyAccessible) return;
    root.dataset.lmpolicyAccessible = 'yes';
    root.addEventListener('keydown', (event) => {
      if (keys.has(event.key) && event.target !== root && !event.shiftKey && !event.ctrlKey && !event.altKey) {
        event.stopPropagation();
      }
    });
    patch(root);
    new MutationObserver(() => patch(root)).observe(root, {subtree: true, childList: true, attributes: true,
                                                           characterData: true});
  }
  // the demo's view may render before or after this output: look for it until it is there (a minute at most)
  const scan = () => document.querySelectorAll('.' + spec.root).forEach(attach);
  scan();
  const watcher = new MutationObserver(scan);
  watcher.observe(document.body, {childList: true, subtree: true});
  setTimeout(() => watcher.disconnect(), 60000);
})(%s, %s);
"""


@dataclass(frozen=True)
class Slider:
    label: str   # its accessible name: what it sets
    symbol: str  # how its value is announced: "<symbol> = <the readout>"


@dataclass(frozen=True)
class Accessible:
    """What a demo's front end must say that ipywidgets does not (see the module's docstring).

    Keys are the CSS classes the demo gave its widgets (``add_class``)."""

    root: str                          # the demo's box
    name: str                          # the demo's region name
    sliders: dict[str, Slider] = field(default_factory=dict)
    groups: dict[str, str] = field(default_factory=dict)    # toggle buttons: the group's name
    selects: dict[str, str] = field(default_factory=dict)   # dropdowns: the menu's name
    play: dict[str, str] = field(default_factory=dict)      # Play's buttons by icon: play, pause, stop
    live: tuple[str, ...] = ()                              # readouts announced when they change

    def spec(self) -> dict:
        return {"root": self.root, "name": self.name,
                "sliders": {cls: {"label": s.label, "symbol": s.symbol} for cls, s in self.sliders.items()},
                "groups": dict(self.groups), "selects": dict(self.selects), "play": dict(self.play),
                "live": list(self.live)}

    def script(self) -> str:
        return SCRIPT % (json.dumps(self.spec(), ensure_ascii=False), json.dumps(STYLE))


def front_end(description: Accessible):
    """The script, as output JupyterLab runs (``IPython.display.Javascript``)."""
    from IPython.display import Javascript

    return Javascript(description.script())
