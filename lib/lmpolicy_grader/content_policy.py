"""The Content-Security-Policy of every page that shows a submission, and the one inline script of the course it allows.

The sanitizer (``preprocessors.sanitize_markup``) keeps a submission's markup inert; this policy is the second
wall, in the browser: a script runs only from the server itself ('self': formgrader's and MathJax's files) or
with the page's nonce (formgrader's grading page: its few inline lines, the nonce new for each request) or as the
MathJax loader below, allowed by its hash. So an inline script, an event handler or a ``javascript:`` URL that got
past the sanitizer would not run. Nothing is framed, no plugin loads, no ``<base>`` moves the page's links, and
forms post only to the server.

The MathJax loader is the feedback's and the grading page's one inline script, the same text in both: it loads
the MathJax 2.7 that the pinned package jupyter-server-mathjax installs, from its folder when a feedback file is
opened from disk (file://), else from the Jupyter server's /static/jupyter_server_mathjax/ (no CDN: a class on a
closed network saw raw LaTeX). Its configuration is a ``window.MathJax`` object, not the ``text/x-mathjax-config``
block nbconvert writes, which MathJax runs through ``eval`` (refused by this policy).
"""
from __future__ import annotations

import base64
import hashlib
import json
import secrets
from functools import lru_cache
from pathlib import Path

MATHJAX_CONFIG = "TeX-AMS-MML_HTMLorMML-full,Safe"  # what the package ships; Safe: no \href to javascript: etc.
# nbconvert's MathJax settings, as MathJax's configuration object
MATHJAX_SETTINGS = {
    "TeX": {"equationNumbers": {"autoNumber": "AMS", "useLabelIds": True}},
    "tex2jax": {"inlineMath": [["$", "$"], ["\\(", "\\)"]], "displayMath": [["$$", "$$"], ["\\[", "\\]"]],
                "processEscapes": True, "processEnvironments": True},
    "displayAlign": "center", "messageStyle": "none", "CommonHTML": {"linebreaks": {"automatic": True}},
}


def mathjax_file() -> Path:
    """The installed MathJax.js (jupyter-server-mathjax's), found without importing the package's server parts."""
    import importlib.util
    return Path(importlib.util.find_spec("jupyter_server_mathjax").origin).resolve().parent / "static" / "MathJax.js"


@lru_cache(maxsize=1)
def mathjax_loader() -> str:
    """The text of the loader script: MathJax's settings, then MathJax.js from disk or from the server."""
    return ("\nwindow.MathJax = %s;\n(function () {\n"
            "    var query = %s;\n"
            "    var path = location.pathname, at = path.search(/\\/(files|formgrader)\\//);\n"
            "    var served = (at >= 0 ? path.slice(0, at) : \"\") + \"/static/jupyter_server_mathjax/MathJax.js\";\n"
            "    var src = (location.protocol === \"file:\" ? %s : served) + query;\n"
            "    document.write('<script src=\"' + src + '\"><\\/script>');\n"
            "})();\n") % (json.dumps(MATHJAX_SETTINGS), json.dumps("?config=" + MATHJAX_CONFIG),
                          json.dumps(mathjax_file().as_uri()))


def script_hash(text: str) -> str:
    """The CSP source that allows an inline script of exactly ``text``."""
    return "'sha256-%s'" % base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def new_nonce() -> str:
    return secrets.token_urlsafe(18)


def policy(nonce: str | None = None) -> str:
    """The policy of a page that shows a submission: as a header (formgrader) or a <meta> tag (both pages).

    A <meta> ignores frame-ancestors, so the server adds Jupyter's own to the header (``formgrader_guard``)."""
    scripts = ["'self'", script_hash(mathjax_loader())] + ([f"'nonce-{nonce}'"] if nonce else [])
    return "; ".join([
        "default-src 'self'",
        "script-src " + " ".join(scripts),
        "style-src 'self' 'unsafe-inline'",  # nbconvert's inlined CSS, MathJax's; the sanitizer limits the student's
        "img-src 'self' data:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "frame-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
    ])
