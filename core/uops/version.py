"""The core's version and its plugin-API version: written once, read by packaging and by the plugin checks.

Why two: the package version says which release this is; ``PLUGIN_API`` says which contract a backend
plugin is held to (`uops.plugin`). A minor bump of the API only adds (a plugin built for an older minor
keeps working); a major bump breaks, and discovery refuses a plugin built for another major in one line.
"""

__version__ = "0.2.0"

#: (major, minor) of the plugin API this core speaks. 1.0 was uops 0.1 (before the API had a number:
#: a plugin that declares none was built for it); 1.1 added `uops.plugin` and what its CHANGELOG entry lists.
PLUGIN_API = (1, 1)
