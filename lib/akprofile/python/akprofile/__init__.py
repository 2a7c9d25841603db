"""akprofile: apply an akfleet profile package from Python.

Pure ctypes over libakprofile (no compiled extension, no PyTorch needed):

    import akprofile
    rt = akprofile.Runtime("/path/to/package")        # verifies; refuses a tampered one
    look = rt.lookup("softmax", [32, 128], "float32")  # exact match or .reason
    if look:
        launcher = akprofile.Launcher(rt)
        launcher.launch(look.kernel, [x_ptr], [y_ptr], stream)

akprofile.torch routes PyTorch calls through a profile (imports torch);
akprofile.gate is the end-to-end gate's driver (docs/apply.md).
"""
from ._lib import find_library, LibraryNotFound
from .profile import (AkpError, PackageRefused, Tampered, Unavailable, Device, Kernel, Lookup, Profile,
                      Runtime, current_device, verify)
from .nvrtc import CompileError
from .cuda import Launcher, LaunchError
from .router import Counters, Router

__all__ = ["find_library", "LibraryNotFound", "AkpError", "PackageRefused", "Tampered", "Unavailable", "Device",
           "Kernel", "Lookup", "Profile", "Runtime", "current_device", "verify", "CompileError", "Launcher",
           "LaunchError", "Counters", "Router"]
