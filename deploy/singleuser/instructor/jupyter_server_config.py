"""The instructor's server on the hub: formgrader's panel in JupyterLab.

JupyterLab shows formgrader in an iframe of the instructor's own server. Since JupyterHub 4.1 every
single-user server sends `Content-Security-Policy: frame-ancestors 'none'`, so that panel is blank.
nbgrader's documentation ("Formgrader with jupyterhub>=4.1") allows framing by the server itself again
with `frame-ancestors 'self'`. Without subdomains 'self' is the whole hub's origin, so it is set here for
instructors only, never for students; a hub with c.JupyterHub.enable_subdomains = True (one origin per
user) makes it safe for everyone. The other choice nbgrader documents is to open formgrader in a
browser tab of its own (<hub>/user/<instructor>/formgrader), which needs no setting at all.
"""
c = get_config()  # noqa: F821

c.ServerApp.tornado_settings = {"headers": {"Content-Security-Policy": "frame-ancestors 'self'"}}
