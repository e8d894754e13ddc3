"""The spec key a model file's errors name, in a module of its own so that the loader, the builders and the
package's ``__init__`` all take it from below (the loader is imported on first use, for sympy's sake)."""

#: the spec key a model file's errors name
FIELD = "system.model"
