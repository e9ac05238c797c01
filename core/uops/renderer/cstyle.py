"""CStyleRenderer: linear uops -> C-family source, for plugins to subclass.

Rendering is driven by ``code_for_op`` (op -> C expression) and the renderer's PatternMatcher
(``extra_matcher``, applied during lowering). Subclasses set the hooks: kernel signature,
buffer qualifiers, launch indices, barriers, local memory, vector types and the type map.

The defaults are clang's C: ``__fp16`` for float16 (a storage type; arithmetic happens in
float), ``__bf16`` for bfloat16 and ``__builtin_bit_cast`` for BITCAST. Other compilers need
overrides in the subclass:

  clang                           the defaults; clang 14 on x86 has no ``__bf16`` and no ``_Float16``
                                  (the CPU plugin declares bfloat16 unsupported)
  gcc >= 12 (x86-64, aarch64)     no ``__fp16`` on x86: ``_Float16`` for float16; no ``__bf16`` before
                                  gcc 13 (declare bfloat16 unsupported); no ``__builtin_bit_cast`` in C
                                  (a union, as ``uops new-plugin --like cpu`` writes it)
  C++ (GPU dialects, nvcc, hipcc)  ``bool`` for bool, ``__restrict`` for ``buffer_suffix``, and the
                                  toolkit's half/bfloat16 class names (uops-cuda: ``half``, ``__nv_bfloat16``)

A dtype the target's compiler has no type for belongs in ``unsupported_dtypes``: kernels that use
it then fail in the lowering with a clear error instead of in the compiler.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from uops.dtypes import AddrSpace, DType, PtrDType, dtypes
from uops.ir.ops import Ops
from uops.ir.uop import UOp
from uops.renderer import Renderer

Expr = Callable[..., str]


def _fn(name32: str, name64: str) -> Callable[[str, DType], str]:
    def f(x: str, dt: DType) -> str:
        return f"{name64}({x})" if dt.scalar() == dtypes.float64 else f"{name32}({x})"

    return f


class CStyleRenderer(Renderer):
    """The C-family renderer: one walk over the linear uops (``render``) and small hooks to override.

    Class attributes spell the language: ``kernel_prefix`` (before the kernel's name, e.g.
    ``__global__ void``), ``buffer_prefix``/``buffer_suffix``/``const_buffer_prefix`` (around a
    buffer parameter's type), ``var_type`` (the C type of a scalar variable: ``int``, as the
    runtime passes int32), ``smem_prefix`` (local memory), ``barrier`` (a workgroup barrier
    statement), ``launch_index`` (GPU-style index spellings), ``type_map`` (dtype -> C type; see
    the module docstring for what each compiler accepts) and ``code_for_op`` (op -> expression).
    """

    kernel_prefix = "void"
    buffer_prefix = ""
    buffer_suffix = " restrict"
    const_buffer_prefix = "const "
    var_type = "int"
    smem_prefix = ""
    barrier = ""
    line_prefix = "  "
    type_map: dict[DType, str] = {
        dtypes.bool: "_Bool",
        dtypes.int8: "signed char",
        dtypes.uint8: "unsigned char",
        dtypes.int16: "short",
        dtypes.uint16: "unsigned short",
        dtypes.int32: "int",
        dtypes.uint32: "unsigned int",
        dtypes.int64: "long long",
        dtypes.uint64: "unsigned long long",
        dtypes.float16: "__fp16",
        dtypes.bfloat16: "__bf16",
        dtypes.float32: "float",
        dtypes.float64: "double",
        dtypes.void: "void",
    }
    code_for_op: dict[Ops, Expr] = {
        Ops.NEG: lambda x, dt: f"(!{x})" if dt == dtypes.bool else f"(-{x})",
        Ops.EXP2: _fn("__builtin_exp2f", "__builtin_exp2"),
        Ops.LOG2: _fn("__builtin_log2f", "__builtin_log2"),
        Ops.SIN: _fn("__builtin_sinf", "__builtin_sin"),
        Ops.SQRT: _fn("__builtin_sqrtf", "__builtin_sqrt"),
        Ops.TRUNC: _fn("__builtin_truncf", "__builtin_trunc"),
        Ops.RECIPROCAL: lambda x, dt: f"(1/{x})",
        Ops.ADD: lambda a, b, dt: f"({a}+{b})",
        Ops.SUB: lambda a, b, dt: f"({a}-{b})",
        Ops.MUL: lambda a, b, dt: f"({a}*{b})",
        Ops.IDIV: lambda a, b, dt: f"({a}/{b})",
        Ops.FDIV: lambda a, b, dt: f"({a}/{b})",
        Ops.MOD: lambda a, b, dt: (
            (f"__builtin_fmod({a}, {b})" if dt.scalar() == dtypes.float64 else f"__builtin_fmodf({a}, {b})")
            if dtypes.is_float(dt)
            else f"({a}%{b})"
        ),
        # NaN-propagating like numpy's maximum (and the PYTHON backend): a NaN on either side wins
        Ops.MAX: lambda a, b, dt: (
            f"((({a}>{b})||({a}!={a}))?{a}:{b})" if dtypes.is_float(dt) else f"(({a}>{b})?{a}:{b})"
        ),
        Ops.CMPLT: lambda a, b, dt: f"({a}<{b})",
        Ops.CMPNE: lambda a, b, dt: f"({a}!={b})",
        Ops.CMPEQ: lambda a, b, dt: f"({a}=={b})",
        Ops.AND: lambda a, b, dt: f"({a}&{b})",
        Ops.OR: lambda a, b, dt: f"({a}|{b})",
        Ops.XOR: lambda a, b, dt: f"({a}^{b})",
        Ops.SHL: lambda a, b, dt: f"({a}<<{b})",
        Ops.SHR: lambda a, b, dt: f"({a}>>{b})",
        Ops.POW: _fn("__builtin_powf", "__builtin_pow"),
        Ops.WHERE: lambda c, a, b, dt: f"({c}?{a}:{b})",
        Ops.MULACC: lambda a, b, c, dt: f"(({a}*{b})+{c})",
    }

    # ----- hooks -----
    def render_dtype(self, dt: DType) -> str:
        """The C type of a dtype: pointers add ``*``, vectors go to ``render_vector_type``, scalars to ``type_map``."""
        if isinstance(dt, PtrDType):
            return self.render_dtype(dt.base) + "*"
        if dt.count > 1:
            return self.render_vector_type(dt)
        try:
            return self.type_map[dt]
        except KeyError:
            raise ValueError(f"{type(self).__name__} has no C type for {dt!r}") from None

    def render_vector_type(self, dt: DType) -> str:
        """A vector type's name (default ``float4``: the scalar name and the lane count; declare it in a prelude)."""
        return f"{self.type_map[dt.scalar()]}{dt.count}"

    def render_vector_pointer(self, dt: DType) -> str:
        """The pointer type a vector load or store of ``dt`` goes through (at an aligned global address)."""
        return f"{self.render_dtype(dt)}*"

    def vector_ok(self, dt: DType) -> bool:
        if not super().vector_ok(dt):
            return False
        try:
            self.render_vector_type(dt)
        except (ValueError, KeyError):
            return False
        return True

    def vector_typedefs(self, uops: list[UOp]) -> list[str]:
        """``ext_vector_type`` typedefs of the vector types ``uops`` use, for clang-based dialects."""
        vectors = sorted(
            {d for u in uops for d in (u.dtype.base if isinstance(u.dtype, PtrDType) else u.dtype,) if d.count > 1},
            key=lambda d: (d.scalar().name, d.count),
        )
        return [
            f"typedef {self.render_dtype(d.scalar())} {self.render_vector_type(d)} "
            f"__attribute__((ext_vector_type({d.count})));"
            for d in vectors
        ]

    def render_vectorize(self, dt: DType, parts: list[str]) -> str:
        """A vector built from lane expressions (default: a compound literal; C++ dialects use a make_ function)."""
        return f"(({self.render_dtype(dt)}){{{', '.join(parts)}}})"

    def render_gep(self, vec: str, lane: int, dt: DType) -> str:
        """One lane of a vector (default ``v[i]``, a clang vector extension; CUDA uses ``v.x``)."""
        return f"{vec}[{lane}]"

    def render_const(self, value: bool | int | float, dt: DType) -> str:
        """A literal of exactly ``dt`` (suffixes, casts for narrow types; NaN and inf through builtins)."""
        if dtypes.is_float(dt):
            f = float(value)
            if math.isnan(f):
                s = '__builtin_nanf("")' if dt != dtypes.float64 else '__builtin_nan("")'
                s = f"-{s}" if math.copysign(1.0, f) < 0 else s  # numpy keeps a NaN's sign: so does the literal
            elif math.isinf(f):
                s = ("-" if f < 0 else "") + ("__builtin_inff()" if dt != dtypes.float64 else "__builtin_inf()")
            else:
                s = repr(f) + ("" if dt == dtypes.float64 else "f")
            if s.startswith("-"):  # "a - -0.0" must not render as "a--0.0"
                s = f"({s})"
            return s if dt in (dtypes.float32, dtypes.float64) else f"(({self.render_dtype(dt)}){s})"
        if dt == dtypes.bool:
            return "1" if value else "0"
        v = int(value)
        if dt in (dtypes.int64,):
            return f"{v}ll"
        if dt in (dtypes.uint64,):
            return f"{v}ull"
        if dt == dtypes.uint32:
            return f"{v}u"
        if dt == dtypes.int32 and v == dtypes.min(dtypes.int32):
            return "(-2147483647-1)"
        return str(v) if dt == dtypes.int32 else f"(({self.render_dtype(dt)}){v})"

    def render_cast(self, x: str, src: DType, dst: DType) -> str:
        """A value conversion (C's cast); dialects whose half classes convert ambiguously go through float."""
        return f"(({self.render_dtype(dst)})({x}))"

    def render_bitcast(self, x: str, src: DType, dst: DType) -> str:
        """Reinterpret the bits of ``x`` (same size): ``__builtin_bit_cast``, which gcc has only in C++."""
        return f"(__builtin_bit_cast({self.render_dtype(dst)}, {x}))"

    # GPU-style renderers spell their launch indices here: "gidx"/"lidx" -> a format of {axis} (x, y, z)
    launch_index: dict[str, str] = {}

    def render_special(self, u: UOp) -> str:
        """A launch index (SPECIAL gidxN / lidxN) through ``launch_index``; CPU-style renderers have none."""
        name: str = u.arg
        if not self.launch_index:
            raise NotImplementedError(f"{type(self).__name__} has no launch indices; SPECIAL {name} cannot be rendered")
        spelling = self.launch_index.get(name[:4])
        if spelling is None or not name[4:].isdigit() or int(name[4:]) > 2:
            raise ValueError(f"{type(self).__name__}: unknown launch index {name!r} (expected gidxN or lidxN, N < 3)")
        return spelling.format(axis="xyz"[int(name[4:])])

    def render_kernel(self, name: str, params: list[str], body: list[str], uops: list[UOp]) -> str:
        """The whole source: the kernel ``name`` (the name the runtime's ``load`` resolves) around its body.

        Override to add a prelude (includes, helpers) or launch bounds; ``uops`` is the kernel for inspection.
        """
        return f"{self.kernel_prefix} {name}({', '.join(params)}) {{\n" + "\n".join(body) + "\n}\n"

    def render_param_buffer(self, u: UOp, name: str, written: bool) -> str:
        """A buffer parameter (``data<slot>``): ``const`` unless the kernel stores to it."""
        assert isinstance(u.dtype, PtrDType)
        const = "" if written else self.const_buffer_prefix
        return f"{self.buffer_prefix}{const}{self.render_dtype(u.dtype.base)}*{self.buffer_suffix} {name}"

    def render_param_var(self, u: UOp) -> str:
        """A scalar variable parameter (DEFINE_VAR): ``var_type`` and its name; passed after the buffers, by name."""
        return f"{self.var_type} {u.arg[0]}"

    # ----- the walk -----
    def render(self, name: str, uops: list[UOp]) -> str:
        """Linear uops -> source: parameters (buffers by slot, then variables by name), then one statement per uop."""
        r: dict[UOp, str] = {}
        params: list[str] = []
        body: list[str] = []
        depth = 1
        counters: dict[str, int] = {}
        written = {s.src[0].src[0] for s in uops if s.op is Ops.STORE and s.src[0].src[0].op is Ops.DEFINE_GLOBAL}

        def fresh(prefix: str) -> str:
            n = counters.get(prefix, 0)
            counters[prefix] = n + 1
            return f"{prefix}{n}"

        def emit(line: str) -> None:
            body.append(self.line_prefix * depth + line)

        globals_ = sorted((u for u in uops if u.op is Ops.DEFINE_GLOBAL), key=lambda u: u.arg)
        for u in globals_:
            r[u] = f"data{u.arg}"
            params.append(self.render_param_buffer(u, r[u], u in written))
        for u in sorted((u for u in uops if u.op is Ops.DEFINE_VAR), key=lambda u: u.arg[0]):
            r[u] = u.arg[0]
            params.append(self.render_param_var(u))

        for u in uops:
            op, dt, src = u.op, u.dtype, u.src
            if op in (Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR):
                continue
            if op is Ops.CONST:
                r[u] = self.render_const(u.arg, dt)
            elif op is Ops.VCONST:
                r[u] = self.render_vectorize(dt, [self.render_const(v, dt.scalar()) for v in u.arg])
            elif op is Ops.SPECIAL:
                r[u] = u.arg
                emit(f"{self.render_dtype(dt)} {u.arg} = {self.render_special(u)}; /* < {r.get(src[0], '?')} */")
            elif op in (Ops.DEFINE_REG, Ops.DEFINE_LOCAL):
                assert isinstance(dt, PtrDType)
                r[u] = fresh("acc" if op is Ops.DEFINE_REG else "smem")
                prefix = self.smem_prefix if dt.addrspace is AddrSpace.LOCAL else ""
                align = (
                    f" __attribute__((aligned({self.vector_max_bytes})))"
                    if self.aligned_locals and prefix == ""
                    else ""
                )
                emit(f"{prefix}{self.render_dtype(dt.base)} {r[u]}[{dt.size}]{align};")
            elif op is Ops.AFTER:
                r[u] = r[src[0]]
            elif op is Ops.RANGE:
                r[u] = f"ridx{u.arg[0]}"
                emit(f"for ({self.render_dtype(dt)} {r[u]} = 0; {r[u]} < {r[src[0]]}; {r[u]}++) {{")
                depth += 1
            elif op is Ops.END:
                depth -= 1
                emit("}")
            elif op is Ops.INDEX:
                r[u] = f"({r[src[0]]}+{r[src[1]]})"
            elif op is Ops.LOAD:
                idx = src[0]
                r[u] = fresh("val")
                addr = r[idx] if dt.count == 1 else f"(({self.render_vector_pointer(dt)}){r[idx]})"
                if len(idx.src) == 3:
                    emit(f"{self.render_dtype(dt)} {r[u]} = {r[idx.src[2]]} ? *{addr} : {r[src[1]]};")
                else:
                    emit(f"{self.render_dtype(dt)} {r[u]} = *{addr};")
            elif op is Ops.STORE:
                idx = src[0]
                vdt = src[1].dtype
                addr = r[idx] if vdt.count == 1 else f"(({self.render_vector_pointer(vdt)}){r[idx]})"
                if len(idx.src) == 3:
                    emit(f"if ({r[idx.src[2]]}) *{addr} = {r[src[1]]};")
                else:
                    emit(f"*{addr} = {r[src[1]]};")
            elif op is Ops.BARRIER:
                if self.barrier:
                    emit(self.barrier)
            elif op is Ops.IF:
                emit(f"if ({r[src[0]]}) {{")
                depth += 1
            elif op is Ops.ENDIF:
                depth -= 1
                emit("}")
            elif op is Ops.CAST:
                r[u] = fresh("cast")
                emit(f"{self.render_dtype(dt)} {r[u]} = {self.render_cast(r[src[0]], src[0].dtype, dt)};")
            elif op is Ops.BITCAST:
                r[u] = fresh("bits")
                emit(f"{self.render_dtype(dt)} {r[u]} = {self.render_bitcast(r[src[0]], src[0].dtype, dt)};")
            elif op is Ops.VECTORIZE:
                r[u] = fresh("vec")
                emit(f"{self.render_dtype(dt)} {r[u]} = {self.render_vectorize(dt, [r[s] for s in src])};")
            elif op is Ops.GEP:
                lanes = [self.render_gep(r[src[0]], lane, dt.scalar()) for lane in u.arg]
                r[u] = lanes[0] if len(lanes) == 1 else self.render_vectorize(dt, lanes)
            elif op in self.code_for_op:
                r[u] = fresh("alu")
                expr = self.code_for_op[op](*[r[s] for s in src], src[0].dtype if op is not Ops.WHERE else dt)
                emit(f"{self.render_dtype(dt)} {r[u]} = {expr};")
            else:
                raise NotImplementedError(f"{type(self).__name__} cannot render {op.name} (dtype {dt!r})")
        return self.render_kernel(name, params, body, uops)


def workgroup_threads(uops: list[UOp], what: str) -> int:
    """Threads per workgroup of a lowered kernel (its launch bound): the product of its constant lidx sizes."""
    threads = 1
    for u in uops:
        if u.op is Ops.SPECIAL and u.arg.startswith("lidx"):
            size = u.src[0]
            if size.op is not Ops.CONST:
                raise ValueError(f"{what} {u.arg} must be a constant, got {size.op.name}")
            threads *= int(size.arg)
    return threads
