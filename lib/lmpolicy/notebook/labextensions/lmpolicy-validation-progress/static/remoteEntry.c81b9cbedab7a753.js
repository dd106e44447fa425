// While nbgrader's Validate button reads "Validating...", say beside it what the validation is doing: which cell
// of the notebook runs now and for how long it has run (lmpolicy.notebook.validation_progress answers the server's
// side). Written by hand in the one shape JupyterLab loads a prebuilt extension from, a module-federation
// container (`init`, `get`), so that the course installs with pip alone: no Node.js and no build.
(function () {
  'use strict';
  const NAME = 'lmpolicy-validation-progress';
  const URL = 'lmpolicy/validation-progress';
  const POLL_MS = 500;
  const VALIDATING = 'Validating...'; // nbgrader's button label while its request runs

  function notebookPath(app, button) {
    for (const widget of app.shell.widgets('main')) {
      if (widget.node.contains(button) && widget.context) {
        return widget.context.path;
      }
    }
    return null;
  }

  async function ask(app, path) {
    const settings = app.serviceManager.serverSettings;
    const headers = settings.token ? { Authorization: 'token ' + settings.token } : {};
    const reply = await fetch(settings.baseUrl + URL + '?path=' + encodeURIComponent(path),
                              { headers: headers, credentials: 'same-origin' });
    return reply.ok ? reply.json() : { running: false, unknown: true }; // a server without the course's side
  }

  // The status beside one button: a line to read (the seconds first, the cell's name last, where an ellipsis
  // may cut it) and, for screen readers, a status that changes only when the cell does (each new cell is heard
  // once, not every second).
  function statusFor(button) {
    const status = document.createElement('span');
    status.className = 'lmpolicy-validation-progress';
    status.style.cssText = 'margin: 0 6px; font-size: var(--jp-ui-font-size1); color: var(--jp-ui-font-color1);' +
      'white-space: nowrap; overflow: hidden; text-overflow: ellipsis; max-width: 0;';
    const line = document.createElement('span');
    line.setAttribute('aria-hidden', 'true');
    const heard = document.createElement('span');
    heard.setAttribute('role', 'status');
    heard.style.cssText = 'position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0);';
    status.append(line, heard);
    (button.closest('.jp-Toolbar-item') || button).insertAdjacentElement('afterend', status); // the toolbar's item
    return { node: status, line: line, heard: heard };
  }

  function show(status, progress, since) {
    let where = 'starting a fresh kernel';
    if (progress.unknown) {
      where = 'running the notebook from the top in a fresh kernel';
    } else if (progress.running && progress.cell > 0) {
      where = 'cell ' + progress.cell + ' of ' + progress.of + (progress.what ? ' \u00b7 ' + progress.what : '');
    } else if (progress.running && progress.of > 0) {
      where = 'a fresh kernel started';
    }
    // only the toolbar's free room (its spacer's): a wider toolbar would send the button to its overflow menu
    const spacer = status.node.parentElement && status.node.parentElement.querySelector('.jp-Toolbar-spacer');
    const free = (spacer ? spacer.getBoundingClientRect().width : 0) + status.node.getBoundingClientRect().width;
    status.node.style.maxWidth = Math.max(0, Math.floor(free) - 16) + 'px';
    const elapsed = progress.running ? progress.seconds : Math.round((Date.now() - since) / 1000);
    status.line.textContent = elapsed + ' s \u00b7 ' + where; // beside the button's own "Validating..." 
    status.node.title = 'Validate runs your saved notebook from the top in a fresh kernel: ' + where;
    if (status.heard.textContent !== 'Validating: ' + where) {
      status.heard.textContent = 'Validating: ' + where;
    }
  }

  function activate(app) {
    const watched = new Map(); // button -> {status, path, since, asking}
    setInterval(function () {
      for (const button of document.querySelectorAll('.validate-button')) {
        const validating = (button.textContent || '').includes(VALIDATING);
        let entry = watched.get(button);
        if (validating && !entry) {
          const path = notebookPath(app, button);
          if (path === null) {
            continue;
          }
          entry = { status: statusFor(button), path: path, since: Date.now(), asking: false };
          watched.set(button, entry);
          show(entry.status, { running: false }, entry.since);
        }
        if (!entry) {
          continue;
        }
        if (!validating || !button.isConnected) {
          entry.status.node.remove();
          watched.delete(button);
        } else if (!entry.asking) {
          entry.asking = true;
          ask(app, entry.path)
            .then(function (progress) { if (watched.get(button) === entry) show(entry.status, progress, entry.since); })
            .catch(function () { /* the next poll asks again */ })
            .finally(function () { entry.asking = false; });
        }
      }
    }, POLL_MS);
  }

  const plugin = { id: NAME + ':plugin', description: 'Says what Validate is doing while it runs.',
                   autoStart: true, activate: activate };
  window._JUPYTERLAB = window._JUPYTERLAB || {};
  window._JUPYTERLAB[NAME] = {
    init: function () { return Promise.resolve(); }, // it shares no module with JupyterLab: nothing to set up
    get: function (module) {
      if (module !== './extension') {
        return Promise.reject(new Error(NAME + ' has no module ' + module));
      }
      // an ES module's shape: JupyterLab takes `default` as the plugin only from a module marked __esModule
      return Promise.resolve(function () { return { __esModule: true, default: plugin }; });
    }
  };
})();
