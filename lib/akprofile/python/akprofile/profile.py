"""Packages, devices and lookups: thin wrappers over libakprofile.

Every decision (is the package intact, which class is this device, does an
entry apply to this call and if not why) is the C library's: this module
only converts arguments and results.  A refused package raises; a lookup
never raises for "nothing applies", it answers Lookup(kernel=None, reason).
"""
import ctypes

from . import _lib
from ._lib import AKP_OK, AKP_FALLBACK, AKP_ETAMPERED, AKP_EUNAVAIL

_ERR = 2048


class AkpError(Exception):
    """A libakprofile call failed: .code is its AKP_E* value."""
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


class PackageRefused(AkpError):
    """The package failed verification or did not load; nothing of it is used."""


class Tampered(PackageRefused):
    """A changed, missing or extra file, a link, or a path leaving the package."""


class Unavailable(AkpError):
    """No GPU, no libcuda or no NVRTC here."""


def _s(b):
    return b.decode("utf-8", "replace") if b is not None else ""


class Device:
    """What identifies a device class (akp_device_t)."""
    __slots__ = ("name", "cc_major", "cc_minor", "driver_major", "nvrtc_version")

    def __init__(self, name, cc_major, cc_minor, driver_major, nvrtc_version):
        self.name = name
        self.cc_major = int(cc_major)
        self.cc_minor = int(cc_minor)
        self.driver_major = int(driver_major)
        self.nvrtc_version = nvrtc_version

    def _c(self):
        d = _lib.Device_t(self.name.encode(), self.cc_major, self.cc_minor, self.driver_major,
                          self.nvrtc_version.encode())
        return d

    @property
    def device_class(self):
        """The class string akfleet's worker forms ("NVIDIA_H200/sm_90/drv580/nvrtc13.0")."""
        buf = ctypes.create_string_buffer(1024)
        rc = _lib.lib().akp_device_class(ctypes.byref(self._c()), buf, len(buf))
        if rc != AKP_OK:
            raise AkpError(rc, "akp_device_class: name and NVRTC version are required")
        return _lib.text(buf)

    @property
    def arch(self):
        return "sm_%d%d" % (self.cc_major, self.cc_minor)

    def __repr__(self):
        return "Device(%r, %d.%d, drv%d, nvrtc%s)" % (self.name, self.cc_major, self.cc_minor,
                                                     self.driver_major, self.nvrtc_version)


def current_device(ordinal=0):
    """This host's CUDA device `ordinal`, through libcuda and libnvrtc
    (akp_device_from_cuda).  Loads NVRTC first where it is not on the
    loader's path (a pip wheel's copy), so the C library finds it too.
    Raises Unavailable with the reason when there is no GPU or NVRTC."""
    from . import nvrtc
    try:
        nvrtc.load()
    except Unavailable:
        pass                       # the C call names what is missing
    dev = _lib.Device_t()
    name, nv, cls, err = (ctypes.create_string_buffer(n) for n in (256, 32, 1024, _ERR))
    rc = _lib.lib().akp_device_from_cuda(int(ordinal), ctypes.byref(dev), name, len(name), nv, len(nv),
                                         cls, len(cls), err, len(err))
    if rc != AKP_OK:
        raise Unavailable(rc, _lib.text(err))
    return Device(_s(dev.name), dev.cc_major, dev.cc_minor, dev.driver_major, _s(dev.nvrtc_version))


class Kernel:
    """One installed entry (akp_kernel_t), copied into Python values.  Keeps
    its profile open: the C entry it points at lives as long as that."""

    def __init__(self, profile, ptr):
        self._profile = profile
        self._ptr = ptr                           # POINTER(Kernel_t), for compile options and launches
        k = ptr.contents
        self.op, self.key, self.dtype = _s(k.op), _s(k.key), _s(k.dtype)
        self.workload, self.candidate = _s(k.workload), _s(k.candidate)
        self.backend, self.entry = _s(k.backend), _s(k.entry)
        self.keys = [_s(k.keys[i]) for i in range(k.ndims)]
        self.dims = [int(k.dims[i]) for i in range(k.ndims)]
        self.params = [(_s(k.param_names[i]), int(k.param_values[i])) for i in range(k.nparams)]
        self.has_launch = bool(k.has_launch)
        self.grid = tuple(k.grid)
        self.block = tuple(k.block)
        self.shared_bytes = int(k.shared_bytes)
        self.inputs = [(_s(k.input_names[i]), int(k.input_counts[i])) for i in range(k.ninputs)]
        self.outputs = [(_s(k.output_names[i]), int(k.output_counts[i])) for i in range(k.noutputs)]
        self.source_name, self.source_digest = _s(k.source_name), _s(k.source_digest)
        self.speedup, self.noise = float(k.speedup), float(k.noise)
        self.batch_id, self.task_id = _s(k.batch_id), _s(k.task_id)
        self.evidence = [_s(k.evidence[i]) for i in range(k.nevidence)]
        # "vendor": no candidate beat the vendor library (cuBLASLt); no
        # kernel here, a lookup of it falls back with .reason
        self.kind = _s(k.kind) or "kernel"
        self.vendor, self.vendor_op, self.reason = _s(k.vendor), _s(k.vendor_op), _s(k.reason)
        self.baseline_us = float(k.baseline_us)
        # kernel ABI 2: the architecture to build for ("sm_90a"; "" the
        # device's own) and the TMA tensor maps akp_launch encodes (names)
        self.arch = _s(k.arch)
        self.tensor_maps = [_s(k.tmaps[i].name) for i in range(k.ntmaps)]

    @property
    def source(self):
        """The kernel source (without the prelude)."""
        k = self._ptr.contents
        return ctypes.string_at(k.source, k.source_len).decode("utf-8") if k.source else ""

    @property
    def prelude(self):
        """The prelude the worker prepended (kernels/ak_kernel_cuda.h, ak_blocks_cuda.h and ak_hopper_cuda.h as installed)."""
        k = self._ptr.contents
        return ctypes.string_at(k.prelude, k.prelude_len).decode("utf-8") if k.prelude else ""

    def compile_options(self):
        """NVRTC options as akfleet's worker compiles this entry, without the
        architecture (akp_compile_options): ["-DAK_DTYPE_FLOAT32", "-DROWS=2", ...]."""
        buf = ctypes.create_string_buffer(4096)
        opts = (ctypes.c_char_p * (_lib.MAX_PARAMS + 4))()
        n = ctypes.c_size_t(0)
        rc = _lib.lib().akp_compile_options(self._ptr, buf, len(buf), opts, len(opts), ctypes.byref(n))
        if rc != AKP_OK:
            raise AkpError(rc, "akp_compile_options failed for %s" % self.key)
        return [opts[i].decode() for i in range(n.value)]

    def launch_args(self, inputs, outputs):
        """The ak_cuda_args_t block (bytes) for these device pointers (akp_launch_args)."""
        ins = (ctypes.c_uint64 * max(1, len(inputs)))(*inputs)
        outs = (ctypes.c_uint64 * max(1, len(outputs)))(*outputs)
        block = ctypes.create_string_buffer(_lib.ARGS_BYTES)
        err = ctypes.create_string_buffer(_ERR)
        rc = _lib.lib().akp_launch_args(self._ptr, ins, len(inputs), outs, len(outputs), block, len(block),
                                        err, len(err))
        if rc != AKP_OK:
            raise AkpError(rc, _lib.text(err))
        return block.raw

    def __repr__(self):
        if self.kind == "vendor":
            return "Kernel(%s %s %s: vendor %s)" % (self.op, "x".join(map(str, self.dims)), self.dtype, self.vendor)
        return "Kernel(%s %s %s: %s %s)" % (self.op, "x".join(map(str, self.dims)), self.dtype, self.candidate,
                                            " ".join("%s=%d" % p for p in self.params))


class Lookup:
    """The answer for one call: .kernel (a Kernel) or None with .reason."""
    __slots__ = ("kernel", "reason")

    def __init__(self, kernel, reason):
        self.kernel = kernel
        self.reason = reason

    def __bool__(self):
        return self.kernel is not None

    def __repr__(self):
        return "Lookup(%r)" % (self.kernel,) if self.kernel else "Lookup(fallback: %s)" % self.reason


def verify(path):
    """Checks the package against its SHA256SUMS (akp_verify); raises
    Tampered / PackageRefused with the C library's message."""
    err = ctypes.create_string_buffer(_ERR)
    rc = _lib.lib().akp_verify(str(path).encode(), err, len(err))
    if rc != AKP_OK:
        raise (Tampered if rc == AKP_ETAMPERED else PackageRefused)(rc, _lib.text(err))


class Profile:
    """A loaded, verified package (akp_load).  Use as a context manager or
    call close(); Kernels handed out keep it alive."""

    def __init__(self, path):
        self.path = str(path)
        self._lib = _lib.lib()
        self._p = ctypes.c_void_p()
        err = ctypes.create_string_buffer(_ERR)
        rc = self._lib.akp_load(self.path.encode(), ctypes.byref(self._p), err, len(err))
        if rc != AKP_OK:
            raise (Tampered if rc == AKP_ETAMPERED else PackageRefused)(rc, "%s: %s" % (self.path, _lib.text(err)))
        self.name = _s(self._lib.akp_name(self._p))
        self.classes = [_s(self._lib.akp_class_name(self._p, i)) for i in range(self._lib.akp_class_count(self._p))]

    def close(self):
        if getattr(self, "_p", None) and self._p.value:
            self._lib.akp_destroy(ctypes.byref(self._p))

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def entries(self, class_index):
        n = self._lib.akp_entry_count(self._p, class_index)
        return [Kernel(self, self._lib.akp_entry(self._p, class_index, i)) for i in range(n)]

    def match(self, device_class, device=None):
        """(class index, "") when the device is one of the profile's classes,
        else (None, why) (akp_match)."""
        idx = ctypes.c_size_t(0)
        why = ctypes.create_string_buffer(_ERR)
        dev = ctypes.byref(device._c()) if device is not None else None
        rc = self._lib.akp_match(self._p, device_class.encode(), dev, ctypes.byref(idx), why, len(why))
        if rc == AKP_OK:
            return idx.value, ""
        if rc == AKP_FALLBACK:
            return None, _lib.text(why)
        raise AkpError(rc, _lib.text(why))

    def lookup(self, device_class, op, dims, dtype):
        """Lookup for (op, dims in the operator's key order, dtype) on
        device_class (akp_lookup): exact match or a fallback with its reason."""
        dims = [int(d) for d in dims]
        if len(dims) > _lib.MAX_DIMS:
            return Lookup(None, "no entry for %s with %d dimensions (at most %d)" % (op, len(dims), _lib.MAX_DIMS))
        arr = (ctypes.c_int64 * max(1, len(dims)))(*dims)
        k = ctypes.POINTER(_lib.Kernel_t)()
        why = ctypes.create_string_buffer(_ERR)
        rc = self._lib.akp_lookup(self._p, device_class.encode(), op.encode(), arr, len(dims), dtype.encode(),
                                  ctypes.byref(k), why, len(why))
        if rc == AKP_OK:
            return Lookup(Kernel(self, k), "")
        if rc == AKP_FALLBACK:
            return Lookup(None, _lib.text(why))
        raise AkpError(rc, _lib.text(why))


class Runtime:
    """A profile bound to one device: the object a program asks.

    device: None (this host's CUDA device `ordinal`, from libcuda), a Device,
    or a class string.  When the device is not one of the profile's classes
    (or no GPU is here and none was given), every lookup falls back with
    that reason: the package is still verified and loaded, never applied."""

    def __init__(self, package, device=None, ordinal=0):
        self.profile = package if isinstance(package, Profile) else Profile(package)
        self.ordinal = ordinal
        self.device = None
        self.device_class = None
        self.why_not = ""
        if isinstance(device, str):
            self.device_class = device
        else:
            if device is None:
                try:
                    device = current_device(ordinal)
                except Unavailable as e:
                    self.why_not = "no device: %s" % e.message
            if device is not None:
                self.device = device
                self.device_class = device.device_class
        self.class_index = None
        if self.device_class is not None:
            self.class_index, why = self.profile.match(self.device_class, self.device)
            if self.class_index is None:
                self.why_not = why

    @property
    def applies(self):
        """True when the device matched a class of the profile."""
        return self.class_index is not None

    def lookup(self, op, dims, dtype):
        if self.class_index is None:
            return Lookup(None, "no entry for %s %s %s: %s" % (op, "x".join(str(int(d)) for d in dims), dtype,
                                                              self.why_not))
        return self.profile.lookup(self.device_class, op, dims, dtype)

    def entries(self):
        return self.profile.entries(self.class_index) if self.class_index is not None else []

    def ops_with_entries(self):
        """The catalog operators this device's class has at least one kernel
        entry for (empty when the profile does not apply here); an operator
        with vendor entries only has nothing to apply (vendor_ops)."""
        return set(k.op for k in self.entries() if k.kind != "vendor")

    def vendor_ops(self):
        """The operators whose every entry on this class is a vendor entry:
        the vendor library stays for all of them."""
        return set(k.op for k in self.entries()) - self.ops_with_entries()
