"""Each user's server on the hub: `jupyterhub-singleuser`, without two pieces of work no user's server needs.

A JupyterLab server spends most of its start importing Python. Two pieces of that work are done for nothing,
at every start of every user, and on a hub where a whole class starts at nine o'clock they add up:

- the IRI grammar. JupyterLab's event validation (jupyter_events) imports jsonschema's format checkers, and
  jsonschema imports `rfc3987_syntax` for the "iri" formats, which builds dozens of Lark parsers as it is
  imported: more than a CPU-second here. No schema of Jupyter's uses those formats (jupyter_server#1559,
  jsonschema#1428). The module is imported when an IRI is first checked instead; the check is jsonschema's.
- the npm registry. `import jupyterlab.labapp` asks for the application's version, and working that out
  reads the npm registry from yarn's configuration by running `node yarn.js config` (half a CPU-second).
  The registry serves only to install lab extensions from npm, which no user's server does; during that
  import only, yarn's configuration is taken as empty (the default registry). Later lookups ask yarn as usual.

Nothing else changes: the server, its extensions and its configuration are jupyterhub-singleuser's. The
users' kernels and terminals are not started through this file. Run as
`python deploy/singleuser/start.py [jupyterhub-singleuser's arguments]` (deploy/jupyterhub_config.py does);
bench/bench_hub.py measures a start with and without it, side by side.
"""
import importlib
import importlib.abc
import importlib.util
import sys

IRI_MODULE = "rfc3987_syntax"


class DeferredIriSyntax(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Gives `import rfc3987_syntax` a module whose `is_valid_syntax` imports the real one at its first call."""

    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name == IRI_MODULE else None

    def create_module(self, spec):
        return None  # Python's default module object

    def exec_module(self, module):
        def is_valid_syntax(term, value):
            return _installed_iri_module().is_valid_syntax(term, value)

        module.is_valid_syntax = is_valid_syntax


def _installed_iri_module():
    """The installed rfc3987_syntax, imported at the first call (this finder leaves, its stand-in is forgotten)."""
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, DeferredIriSyntax)]
    stand_in = sys.modules.get(IRI_MODULE)
    if stand_in is not None and isinstance(getattr(stand_in.__spec__, "loader", None), DeferredIriSyntax):
        del sys.modules[IRI_MODULE]
    return importlib.import_module(IRI_MODULE)


def import_jupyterlab_without_yarn() -> None:
    """`import jupyterlab.labapp` with yarn's configuration taken as empty while it runs (see the docstring)."""
    from jupyterlab import commands

    asks_yarn = commands._yarn_config
    commands._yarn_config = lambda logger: {"yarn config": {}, "npm config": {}}
    try:
        importlib.import_module("jupyterlab.labapp")
    finally:
        commands._yarn_config = asks_yarn


def main() -> int:
    sys.meta_path.insert(0, DeferredIriSyntax())
    import_jupyterlab_without_yarn()
    from jupyterhub.singleuser import main as singleuser_main

    return singleuser_main()


if __name__ == "__main__":
    sys.exit(main())
