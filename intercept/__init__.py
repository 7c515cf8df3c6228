"""The shim's contract: segment layout bindings (from libshim/include/tgs/segment.h) and
locating/injecting the shim library."""
