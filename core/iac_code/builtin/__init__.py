"""Built-in plugins: kernel features registered through the same manager as third-party ones.

The plugin manager registers the modules listed in :data:`iac_code.server.plugins.BUILTIN_PLUGINS`
(imported by name, so the kernel's lower layers never import a plugin module).
"""
