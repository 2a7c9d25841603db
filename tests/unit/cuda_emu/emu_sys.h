/*  tests/unit/cuda_emu/emu_sys.h: the system headers of a device
    reference's emulation (main.cpp and emu.h include them too), which
    tests/unit/unit_emu.c precompiles once a test process and puts first
    (-include): g++ spends about half of a build in them.  Nothing here
    may depend on a macro of ours (the builds define different ones). */
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <setjmp.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <vector>
