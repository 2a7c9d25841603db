"""The ctypes declarations of libakprofile (lib/akprofile/akprofile.h).

Only this module knows the C signatures and the layout of akp_kernel_t;
it refuses a library whose akp_kernel_t has another size than the mirror
here (akp_kernel_size), so a stale library cannot be misread.

Where the library is found, first hit wins:
  1. $AKPROFILE_LIB (a path to libakprofile.so);
  2. next to this package (akprofile/libakprofile.so, or ../lib/ and
     ../../lib/ of it: a bundle's bin/python/akprofile finds bin/lib);
  3. the build folders of the source tree this package sits in
     (build-bundle/bin/lib, build/lib, build-test/lib, ...);
  4. ctypes.util.find_library("akprofile") (the system's search path).
"""
import ctypes
import ctypes.util
import os

AKP_OK = 0
AKP_FALLBACK = 1
AKP_EINVAL = -1
AKP_EIO = -3
AKP_ENOTFOUND = -4
AKP_ETAMPERED = -20
AKP_EUNAVAIL = -17
AKP_ELAUNCH = -30
AKP_ARGS_BYTES = 216          # akprofile.h: the ak_cuda_args_t block

MAX_DIMS = 8
MAX_BUFS = 8
MAX_PARAMS = 16
ARGS_BYTES = 216

_c_str = ctypes.c_char_p


MAX_TMAPS = 8
MAX_RANK = 5


class Tmap_t(ctypes.Structure):
    """akp_tmap_t (akprofile.h)."""
    _fields_ = [
        ("name", _c_str), ("output", ctypes.c_bool), ("index", ctypes.c_uint), ("rank", ctypes.c_uint),
        ("dims", ctypes.c_uint64 * MAX_RANK), ("strides", ctypes.c_uint64 * (MAX_RANK - 1)),
        ("box", ctypes.c_uint * MAX_RANK), ("elem_bytes", ctypes.c_uint),
        ("swizzle", ctypes.c_uint), ("l2", ctypes.c_uint), ("oob", ctypes.c_uint), ("absent", ctypes.c_bool),
    ]


class Kernel_t(ctypes.Structure):
    """akp_kernel_t, field for field (akprofile.h)."""
    _fields_ = [
        ("op", _c_str), ("key", _c_str), ("dtype", _c_str), ("workload", _c_str),
        ("candidate", _c_str), ("backend", _c_str), ("entry", _c_str),
        ("ndims", ctypes.c_size_t),
        ("keys", _c_str * MAX_DIMS),
        ("dims", ctypes.c_int64 * MAX_DIMS),
        ("nparams", ctypes.c_size_t),
        ("param_names", _c_str * MAX_PARAMS),
        ("param_values", ctypes.c_int64 * MAX_PARAMS),
        ("has_launch", ctypes.c_bool),
        ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared_bytes", ctypes.c_uint),
        ("ninputs", ctypes.c_size_t), ("noutputs", ctypes.c_size_t),
        ("input_names", _c_str * MAX_BUFS), ("output_names", _c_str * MAX_BUFS),
        ("input_counts", ctypes.c_int64 * MAX_BUFS), ("output_counts", ctypes.c_int64 * MAX_BUFS),
        # source and prelude are not NUL-terminated by contract: raw pointers
        ("source", ctypes.c_void_p), ("source_len", ctypes.c_size_t),
        ("source_name", _c_str), ("source_digest", _c_str),
        ("prelude", ctypes.c_void_p), ("prelude_len", ctypes.c_size_t),
        ("speedup", ctypes.c_double), ("noise", ctypes.c_double),
        ("batch_id", _c_str), ("task_id", _c_str),
        ("nevidence", ctypes.c_size_t),
        ("evidence", _c_str * 4),
        ("kind", _c_str), ("vendor", _c_str), ("vendor_op", _c_str), ("reason", _c_str),
        ("baseline_us", ctypes.c_double),
        ("arch", _c_str), ("ntmaps", ctypes.c_size_t), ("tmaps", Tmap_t * MAX_TMAPS),
    ]


class Device_t(ctypes.Structure):
    """akp_device_t."""
    _fields_ = [("name", _c_str), ("cc_major", ctypes.c_int), ("cc_minor", ctypes.c_int),
                ("driver_major", ctypes.c_int), ("nvrtc_version", _c_str)]


class LibraryNotFound(OSError):
    pass


def _candidates():
    env = os.environ.get("AKPROFILE_LIB")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    for rel in ("libakprofile.so", "../lib/libakprofile.so", "../../lib/libakprofile.so"):
        yield os.path.normpath(os.path.join(here, rel))
    # lib/akprofile/python/akprofile -> the source tree's root
    root = os.path.normpath(os.path.join(here, "..", "..", "..", ".."))
    for build in ("build-bundle/bin/lib", "build/lib", "build-test/lib", "build-rel/lib"):
        yield os.path.join(root, build, "libakprofile.so")


def find_library():
    """The path of libakprofile that would be loaded (LibraryNotFound if none)."""
    tried = []
    for path in _candidates():
        tried.append(path)
        if os.path.isfile(path):
            return path
    if "AKPROFILE_LIB" in os.environ:
        raise LibraryNotFound("AKPROFILE_LIB=%s: no such file" % os.environ["AKPROFILE_LIB"])
    name = ctypes.util.find_library("akprofile")
    if name:
        return name
    raise LibraryNotFound("libakprofile.so not found (set AKPROFILE_LIB); tried: " + ", ".join(tried))


def _declare(lib):
    P = ctypes.c_void_p
    sz = ctypes.c_size_t
    i64p = ctypes.POINTER(ctypes.c_int64)
    u64p = ctypes.POINTER(ctypes.c_uint64)
    kp = ctypes.POINTER(Kernel_t)
    sigs = {
        "akp_verify": (ctypes.c_int, [_c_str, ctypes.c_char_p, sz]),
        "akp_load": (ctypes.c_int, [_c_str, ctypes.POINTER(P), ctypes.c_char_p, sz]),
        "akp_destroy": (None, [ctypes.POINTER(P)]),
        "akp_name": (_c_str, [P]),
        "akp_class_count": (sz, [P]),
        "akp_class_name": (_c_str, [P, sz]),
        "akp_entry_count": (sz, [P, sz]),
        "akp_entry": (kp, [P, sz, sz]),
        "akp_device_class": (ctypes.c_int, [ctypes.POINTER(Device_t), ctypes.c_char_p, sz]),
        "akp_device_from_cuda": (ctypes.c_int, [ctypes.c_int, ctypes.POINTER(Device_t), ctypes.c_char_p, sz,
                                                ctypes.c_char_p, sz, ctypes.c_char_p, sz, ctypes.c_char_p, sz]),
        "akp_match": (ctypes.c_int, [P, _c_str, ctypes.POINTER(Device_t), ctypes.POINTER(sz),
                                     ctypes.c_char_p, sz]),
        "akp_lookup": (ctypes.c_int, [P, _c_str, _c_str, i64p, sz, _c_str, ctypes.POINTER(kp),
                                      ctypes.c_char_p, sz]),
        "akp_compile_options": (ctypes.c_int, [kp, ctypes.c_char_p, sz, ctypes.POINTER(ctypes.c_char_p),
                                               sz, ctypes.POINTER(sz)]),
        "akp_kernel_size": (sz, []),
        "akp_launch_args": (ctypes.c_int, [kp, u64p, sz, u64p, sz, P, sz, ctypes.c_char_p, sz]),
        "akp_launch": (ctypes.c_int, [kp, P, P, u64p, sz, u64p, sz, ctypes.POINTER(ctypes.c_int),
                                      ctypes.c_char_p, sz]),
        "akp_launch_prepare": (ctypes.c_int, [kp, P, ctypes.POINTER(sz), ctypes.POINTER(sz),
                                              ctypes.POINTER(ctypes.c_int), ctypes.c_char_p, sz]),
        "akp_launch_block": (ctypes.c_int, [kp, P, P, P]),
    }
    for name, (res, args) in sigs.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise LibraryNotFound("%s lacks %s: an older libakprofile" % (lib._name, name))
        fn.restype = res
        fn.argtypes = args


_lib = None


def lib():
    """The loaded, declared and layout-checked library (loaded once)."""
    global _lib
    if _lib is None:
        path = find_library()
        try:
            handle = ctypes.CDLL(path)
        except OSError as e:
            raise LibraryNotFound("%s: %s" % (path, e))
        _declare(handle)
        have = handle.akp_kernel_size()
        if have != ctypes.sizeof(Kernel_t):
            raise LibraryNotFound("%s: akp_kernel_t is %d bytes there, %d in this binding: rebuild one of them"
                                  % (path, have, ctypes.sizeof(Kernel_t)))
        _lib = handle
    return _lib


def text(buf):
    """A C message buffer as str."""
    return buf.value.decode("utf-8", "replace")
