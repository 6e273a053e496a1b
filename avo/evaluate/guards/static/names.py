"""What the static guard forbids, by name. Kept apart from the checker so the lists read as a policy."""

from __future__ import annotations

_MATMUL = frozenset(
    """
    matmul mm bmm linear einsum addmm baddbmm addbmm tensordot chain_matmul multi_dot inner dot vdot mv addmv outer ger
    kron addmm_ baddbmm_ addbmm_ _scaled_mm _int_mm _addmm_activation __matmul__ __rmatmul__ __imatmul__ imatmul
    conv1d conv2d conv3d
    convolution _convolution conv_transpose1d conv_transpose2d conv_transpose3d bilinear Linear Bilinear LazyLinear
    Conv1d Conv2d Conv3d cublas cublasLt cublaslt gemm gemv cutlass_gemm
    """.split()
)
_ATTENTION = _MATMUL | frozenset(
    """
    scaled_dot_product_attention _scaled_dot_product_attention_math _scaled_dot_product_flash_attention
    _scaled_dot_product_efficient_attention _scaled_dot_product_cudnn_attention _flash_attention_forward
    _efficient_attention_forward softmax log_softmax _softmax _safe_softmax _log_softmax softmin
    multi_head_attention_forward MultiheadAttention Softmax LogSoftmax flex_attention sdpa_kernel cudnn
    """.split()
)
LIBRARY_NAMES: dict[str, frozenset[str]] = {"gemm": _MATMUL, "attention": _ATTENTION}
"""Per task: names that, anywhere in a dotted path rooted at a tensor library (or as a method on a tensor), spell
the task's library path. Tasks not listed get the GEMM set: cuBLAS is nobody's kernel."""

WHOLE_MODULES: dict[str, tuple[str, ...]] = {"attention": ("torch.nn.functional", "torch.nn.attention")}
"""Per task: modules that are the library path in their entirety."""

LIBRARY_ROOTS = frozenset("torch numpy cupy cupyx cupy_backends scipy jax jaxlib tensorflow operator".split())

LIBRARY_PACKAGES = (
    "flash_attn", "flash_attn_interface", "xformers", "transformer_engine", "apex", "cublas", "nvidia.cublas",
    "cupy.cublas", "cupy.linalg", "cupy.cuda.cublas", "cupyx", "cupy_backends.cuda.libs.cublas", "numpy.linalg",
    "scipy.linalg", "torch.linalg", "sageattention", "liger_kernel", "deep_gemm", "torchao", "nvmath", "cudnn",
)
"""Packages (or sub-packages) that are a library path in their entirety, whatever the task (nvmath-python: cuBLASLt;
cudnn: cuDNN's frontend, its SDPA among them)."""

FORBIDDEN_MODULES = (
    "subprocess", "socket", "ctypes", "cffi", "threading", "_thread", "multiprocessing", "concurrent", "asyncio",
    "signal", "pickle", "_pickle", "cPickle", "marshal", "shelve", "dill", "cloudpickle", "joblib", "avo", "pty",
    "pexpect", "sh", "plumbum", "http", "urllib", "urllib3", "requests", "httpx", "ftplib", "smtplib", "telnetlib",
    "xmlrpc", "gc", "builtins", "__builtin__", "faulthandler", "code", "codeop", "runpy", "zipimport", "imp",
    "sys.monitoring", "torch.multiprocessing", "torch.distributed", "torch.utils._python_dispatch",
    "torch._subclasses", "torch.overrides", "_posixsubprocess", "posix", "nt", "mmap", "resource", "atexit",
)
SANCTIONED = frozenset(
    "avo.cuda avo.cuda.load_module avo.cuda.CudaModule avo.cuda.CudaCompileError avo.cuda.target_arch "
    "avo.cuda.tensor_map avo.cuda.TensorMap avo.cuda.current_stream avo.cuda.KeptLaunches avo.cuda.kept_zeros "
    "avo.cuda.capturing".split()
)
"""The one part of avo a candidate may import: the NVRTC/CuPy path for CUDA C++ sources (its public names only)."""

"""Modules a kernel has no business importing (processes, sockets, native calls, threads, unpickling, the evaluator
itself, the machinery the runtime guards are built on)."""

FORBIDDEN_FUNCTIONS = frozenset(
    """
    os.system os.popen os.fork os.forkpty os.kill os.killpg os.posix_spawn os.posix_spawnp os.execl os.execle
    os.execlp os.execlpe os.execv os.execve os.execvp os.execvpe os.spawnl os.spawnle os.spawnlp os.spawnlpe os.spawnv
    os.spawnve os.spawnvp os.spawnvpe os.startfile os.register_at_fork os.putenv os.write os.writev os.pwrite
    os.pwritev os.sendfile os.ftruncate os.lseek os.dup os.dup2 os.fdopen os.close os.closerange os._exit os.abort
    os.pipe os.mkfifo os.mknod os.setsid os.setpgid os.openpty sys._getframe
    sys._current_frames sys.setprofile sys.settrace sys.addaudithook sys.modules sys.meta_path sys.path_hooks
    torch.load torch._C._set_dispatch_mode torch._C._unset_dispatch_mode torch._C._push_on_torch_dispatch_stack
    torch._C._pop_torch_dispatch_stack torch._C._len_torch_dispatch_stack torch._C._get_dispatch_stack_at
    torch._C._DisableTorchDispatch torch._C.DisableTorchFunction torch._C.DisableTorchFunctionSubclass
    torch._C._ExcludeDispatchKeyGuard torch._C._dispatch_tls_set_dispatch_key_excluded torch._C._EnablePythonDispatcher
    torch._C._DisablePythonDispatcher torch._C._set_torch_dispatch_mode torch._C._disabled_torch_dispatch_impl
    torch.autograd.profiler torch.profiler torch.cuda.memory._record_memory_history
    numpy.load torch.from_file
    """.split()
)
"""Functions that start processes, touch file descriptors the evaluator holds, reach into the interpreter, or tamper
with the dispatcher the runtime guard uses."""

ESCAPE_ATTRIBUTES = frozenset(
    """
    __subclasses__ __globals__ __builtins__ __code__ __closure__ __import__ __loader__ __spec__ f_globals f_locals
    f_back f_builtins gi_frame cr_frame ag_frame tb_frame __reduce__ __reduce_ex__ __setstate__
    """.split()
)
"""Attributes that reach objects the code never named (the classic ways out of any name-based check)."""

RUNTIME_COMPILE = frozenset(
    """
    torch.utils.cpp_extension torch.compile torch.cuda.jiterator torch._inductor torch._dynamo torch.jit
    torch.export cupy.ElementwiseKernel cupy.ReductionKernel cupy.fuse cupy.cuda.compiler cupy.cuda.nvrtc cupyx.jit
    pycuda numba cuda.nvrtc cuda.bindings.nvrtc cuda.core cuda.cooperative cutlass_library
    nvrtc builtins.exec builtins.eval builtins.compile types.FunctionType types.CodeType
    importlib.machinery importlib.util.spec_from_loader importlib.abc code.InteractiveInterpreter
    triton.runtime.build triton.runtime._build setuptools distutils pybind11 tvm
    """.split()
)
"""Ways to turn source text into running code other than Triton's JIT and CuPy's RawModule/RawKernel."""

ALLOWED_IN_HANDLER = ("torch.cuda", "torch.empty", "torch.device", "torch.Size", "torch.finfo", "torch.iinfo",
                      "torch.Tensor", "torch.version", "torch.__version__", "torch.dtype")
TORCH_DTYPES = frozenset(
    "float16 bfloat16 float32 float64 float half float8_e4m3fn float8_e5m2 int8 int16 int32 int64 uint8 bool".split()
)

# C/C++/CUDA sources: identifiers that, called or included, mean the same cheats in another language.
C_FILE_CALLS = frozenset("fopen fopen64 freopen open openat creat unlink remove rename mkdir rmdir truncate".split())
C_FILE_TYPES = frozenset("ifstream ofstream fstream filebuf".split())
C_PROCESS_CALLS = frozenset(
    """
    system popen execl execlp execle execv execve execvp execvpe fork vfork posix_spawn posix_spawnp dlopen dlsym
    pthread_create cudaLaunchHostFunc cudaStreamAddCallback cuLaunchHostFunc cuStreamAddCallback socket connect kill
    raise signal sigaction ptrace
    """.split()
)
C_FORBIDDEN_HEADERS = {
    "cublas": "static.library_call", "cublasLt": "static.library_call", "cudnn": "static.library_call",
    "cublas_v2": "static.library_call", "cufft": "static.library_call", "fstream": "static.file_access",
    "thread": "static.forbidden_import", "unistd": "static.forbidden_import", "dlfcn": "static.forbidden_import",
    "spawn": "static.forbidden_import", "pthread": "static.forbidden_import", "sys/socket": "static.forbidden_import",
    "signal": "static.forbidden_import", "csignal": "static.forbidden_import", "future": "static.forbidden_import",
}

TENSOR_METHODS = frozenset(
    """
    matmul mm bmm addmm addmm_ baddbmm baddbmm_ addbmm addbmm_ dot vdot inner outer ger mv addmv kron __matmul__
    __rmatmul__ __imatmul__ softmax log_softmax
    """.split()
)
"""Library names that are also tensor (or ndarray) methods, judged on objects the checker cannot name."""

UNSEEN_ROOTS = frozenset("cupy cupyx cupy_backends numpy scipy jax jaxlib tensorflow".split())
"""Libraries whose work runs outside torch's dispatcher, where the run-time op recorder never sees it (CuPy's own
kernels and its cuBLAS, NumPy's BLAS): every name a candidate reaches in them must be one the static guard can read.
Such a module handed on as a value (to getattr with a computed name, vars, a list, a function) is rejected."""
SCALAR_TYPES = frozenset(
    "float16 float32 float64 int8 int16 int32 int64 uint8 uint16 uint32 uint64 intp uintp bool_ dtype".split()
)
"""Scalar types of NumPy and CuPy (kernel arguments, dtypes): values a candidate may pass on."""
CUPY_NAMES = frozenset({"RawModule", "RawKernel", "cuda"}) | SCALAR_TYPES
CUPY_CUDA_NAMES = frozenset(
    "Stream ExternalStream Event Device MemoryPointer UnownedMemory runtime driver memory alloc get_current_stream "
    "get_elapsed_time".split()
)
"""The CuPy a candidate may use: its NVRTC path (RawModule, RawKernel), scalar types for kernel arguments, and
cupy.cuda's streams, events, devices and memory. Its arrays are not among them: their methods and the rest of CuPy
run CuPy's own kernels and cuBLAS."""
NUMPY_FROM_DATA = frozenset(
    "asarray asanyarray ascontiguousarray asfortranarray array frombuffer fromiter from_dlpack asmatrix matrix".split()
)
TENSOR_TO_NUMPY = frozenset({"numpy", "__array__"})
"""NumPy arrays of a tensor's data, and the tensor methods that make them: such an array's methods (`dot`, reached by a
name built at run time) run NumPy's BLAS, which the run-time op recorder cannot see. NumPy's scalars, shapes and
math on sizes stay allowed."""
