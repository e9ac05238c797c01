"""CStyleRenderer: linear uops -> C-family source, as rules a dialect extends by prepending its own.

Each uop's text comes from ``string_rewrite``, a PatternMatcher whose rules return strings: the first
rule that matches and does not decline (returns None) gives the text. A dialect writes only what
differs and puts it in front: ``string_rewrite = PatternMatcher(my_rules) + CStyleRenderer.string_rewrite``.
A rule gets the captures and ``ctx``, a ``RenderContext``: ``ctx[u]`` is the name or expression already
given to uop ``u``, ``ctx.ren`` the renderer (its type spellings), ``ctx.const`` / ``ctx.vector`` spell a
literal. The walk (``render``) names each value, declares it, indents loops and assembles the kernel;
type names (``type_map``, ``render_dtype``, ``render_vector_type``) and the whole-source layout
(``render_kernel``) stay methods.

The defaults are clang's C: ``__fp16`` for float16 (a storage type; arithmetic happens in
float), ``__bf16`` for bfloat16 and ``__builtin_bit_cast`` for BITCAST. Other compilers need
rules or overrides in the subclass:

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
from uops.ir.ops import GroupOp, Ops
from uops.ir.rewrite import PatternMatcher, Rule, UPat
from uops.ir.uop import UOp
from uops.renderer import Renderer

__all__ = [
    "CStyleRenderer",
    "RenderContext",
    "alu_rules",
    "base_rules",
    "c_const",
    "cast_via_float",
    "typed_reciprocal",
    "workgroup_threads",
]

Expr = Callable[..., str | None]


class RenderContext:
    """One kernel's rendering: the text each uop was given so far, and the renderer (what rules read as ``ctx``)."""

    def __init__(self, ren: CStyleRenderer, written: frozenset[UOp] = frozenset()) -> None:
        self.ren = ren
        self.names: dict[UOp, str] = {}
        self.written = written  # the DEFINE_GLOBALs the kernel stores to

    def __getitem__(self, u: UOp) -> str:
        return self.names[u]

    def get(self, u: UOp, default: str) -> str:
        return self.names.get(u, default)

    def dtype(self, dt: DType) -> str:
        """The source type of ``dt`` (``ren.render_dtype``)."""
        return self.ren.render_dtype(dt)

    def text(self, u: UOp) -> str:
        """``u``'s text from the renderer's rules; NotImplementedError when no rule renders it."""
        out = self.ren.string_rewrite.rewrite(u, self)
        if out is None:
            raise NotImplementedError(f"{type(self.ren).__name__} cannot render {u.op.name} (dtype {u.dtype!r})")
        return out

    def const(self, value: bool | int | float, dt: DType) -> str:
        """A literal of exactly ``dt``, through the CONST rules."""
        return self.text(UOp(Ops.CONST, dt, (), value))

    def vector(self, dt: DType, parts: list[str]) -> str:
        """A vector built from lane expressions (the renderer's ``vector_format``)."""
        r = self.ren
        return r.vector_format.format(type=r.render_dtype(dt), vtype=r.render_vector_type(dt), parts=", ".join(parts))


def alu_rules(table: dict[Ops, Expr]) -> list[Rule]:
    """Rules from an op -> expression table: ``f(*operands, dt)``, ``dt`` the first operand's dtype (WHERE: the
    result's). An entry returning None declines, so the next rule for the op is tried."""

    def rule(fn: Expr) -> Callable[[RenderContext, UOp], str | None]:
        def render(ctx: RenderContext, x: UOp) -> str | None:
            return fn(*[ctx[s] for s in x.src], x.dtype if x.op is Ops.WHERE else x.src[0].dtype)

        return render

    return [(UPat(op, name="x"), rule(fn)) for op, fn in table.items()]


def _fn(name32: str, name64: str) -> Callable[[str, DType], str]:
    def f(x: str, dt: DType) -> str:
        return f"{name64}({x})" if dt.scalar() == dtypes.float64 else f"{name32}({x})"

    return f


def c_const(ctx: RenderContext, x: UOp) -> str:
    """A literal of exactly ``x.dtype`` (suffixes, casts for narrow types; NaN and inf through builtins)."""
    value, dt = x.arg, x.dtype
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
        return s if dt in (dtypes.float32, dtypes.float64) else f"(({ctx.dtype(dt)}){s})"
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
    return str(v) if dt == dtypes.int32 else f"(({ctx.dtype(dt)}){v})"


def _special(ctx: RenderContext, x: UOp) -> str:
    """A launch index (SPECIAL gidxN / lidxN) through ``launch_index``; CPU-style renderers have none."""
    ren, name = ctx.ren, x.arg
    if not ren.launch_index:
        raise NotImplementedError(f"{type(ren).__name__} has no launch indices; SPECIAL {name} cannot be rendered")
    spelling = ren.launch_index.get(name[:4])
    if spelling is None or not name[4:].isdigit() or int(name[4:]) > 2:
        raise ValueError(f"{type(ren).__name__}: unknown launch index {name!r} (expected gidxN or lidxN, N < 3)")
    return spelling.format(axis="xyz"[int(name[4:])])


def _local(ctx: RenderContext, x: UOp) -> str:
    """A register or local array's declaration (local ones aligned for vector loads where the renderer says)."""
    ren, dt = ctx.ren, x.dtype
    assert isinstance(dt, PtrDType)
    prefix = ren.smem_prefix if dt.addrspace is AddrSpace.LOCAL else ""
    align = f" __attribute__((aligned({ren.vector_max_bytes})))" if ren.aligned_locals and prefix == "" else ""
    return f"{prefix}{ctx.dtype(dt.base)} {ctx[x]}[{dt.size}]{align};"


def _address(ctx: RenderContext, idx: UOp, dt: DType) -> str:
    """Where a load or store of ``dt`` goes: the INDEX, through a vector pointer for a vector access."""
    return ctx[idx] if dt.count == 1 else f"(({ctx.ren.render_vector_pointer(dt)}){ctx[idx]})"


def _load(ctx: RenderContext, x: UOp) -> str:
    idx = x.src[0]
    addr = _address(ctx, idx, x.dtype)
    return f"{ctx[idx.src[2]]} ? *{addr} : {ctx[x.src[1]]}" if len(idx.src) == 3 else f"*{addr}"


def _store(ctx: RenderContext, x: UOp) -> str:
    idx, val = x.src[0], x.src[1]
    addr = _address(ctx, idx, val.dtype)
    return f"if ({ctx[idx.src[2]]}) *{addr} = {ctx[val]};" if len(idx.src) == 3 else f"*{addr} = {ctx[val]};"


def _loop(ctx: RenderContext, x: UOp) -> str:
    i = ctx[x]
    return f"for ({ctx.dtype(x.dtype)} {i} = 0; {i} < {ctx[x.src[0]]}; {i}++) {{"


def _param_buffer(ctx: RenderContext, x: UOp) -> str:
    """A buffer parameter (``data<slot>``): ``const`` unless the kernel stores to it."""
    assert isinstance(x.dtype, PtrDType)
    ren = ctx.ren
    const = "" if x in ctx.written else ren.const_buffer_prefix
    return f"{ren.buffer_prefix}{const}{ctx.dtype(x.dtype.base)}*{ren.buffer_suffix} {ctx[x]}"


def cast_via_float(halves: tuple[DType, ...]) -> Callable[[RenderContext, UOp], str]:
    """A CAST rule for 16-bit float classes that convert only to and from float: other conversions go through
    float, one user-defined conversion each, never ambiguous."""

    def cast(ctx: RenderContext, x: UOp) -> str:
        src, dst, v = x.src[0].dtype, x.dtype, ctx[x.src[0]]
        if src.scalar() in halves and dst.scalar() != dtypes.float32:
            v = f"(float)({v})"
        if dst.scalar() in halves and src.scalar() not in (dtypes.float32, dst.scalar()):
            v = f"(float)({v})"
        return f"(({ctx.dtype(dst)})({v}))"

    return cast


def typed_reciprocal(ctx: RenderContext, x: UOp) -> str:
    """1/x with a one of x's type, so 16-bit floats stay 16-bit (and C++ half classes see no ambiguous ``1/h``)."""
    return f"({ctx.const(1.0, x.dtype.scalar())}/{ctx[x.src[0]]})"


#: the C-family text of every uop the lowering makes; dialects prepend their own rules
base_rules: list[Rule] = [
    # parameters: buffers by slot, then scalar variables (``var_type``, passed after the buffers, by name)
    (UPat(Ops.DEFINE_GLOBAL, name="x"), _param_buffer),
    (UPat(Ops.DEFINE_VAR, name="x"), lambda ctx, x: f"{ctx.ren.var_type} {x.arg[0]}"),
    # values given inline
    (UPat(Ops.CONST, name="x"), c_const),
    (UPat(Ops.VCONST, name="x"), lambda ctx, x: ctx.vector(x.dtype, [ctx.const(v, x.dtype.scalar()) for v in x.arg])),
    (UPat(Ops.AFTER, name="x"), lambda ctx, x: ctx[x.src[0]]),
    (UPat(Ops.INDEX, name="x"), lambda ctx, x: f"({ctx[x.src[0]]}+{ctx[x.src[1]]})"),
    (UPat(Ops.GEP, name="x"), lambda ctx, x: _gep(ctx, x)),
    # values declared once, by name
    (UPat(Ops.SPECIAL, name="x"), _special),
    (UPat(Ops.LOAD, name="x"), _load),
    (UPat(Ops.CAST, name="x"), lambda ctx, x: f"(({ctx.dtype(x.dtype)})({ctx[x.src[0]]}))"),
    (UPat(Ops.BITCAST, name="x"), lambda ctx, x: f"(__builtin_bit_cast({ctx.dtype(x.dtype)}, {ctx[x.src[0]]}))"),
    (UPat(Ops.VECTORIZE, name="x"), lambda ctx, x: ctx.vector(x.dtype, [ctx[s] for s in x.src])),
    # statements
    (UPat((Ops.DEFINE_REG, Ops.DEFINE_LOCAL), name="x"), _local),
    (UPat(Ops.RANGE, name="x"), _loop),
    (UPat(Ops.END), lambda: "}"),
    (UPat(Ops.STORE, name="x"), _store),
    (UPat(Ops.BARRIER), lambda ctx: ctx.ren.barrier),
    *alu_rules(
        {
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
    ),
]


def _gep(ctx: RenderContext, x: UOp) -> str:
    """Lanes of a vector: one lane is ``lane_format``; several are a vector of them."""
    fmt, vec = ctx.ren.lane_format, ctx[x.src[0]]
    lanes = [fmt.format(vec=vec, lane=lane, axis="xyzw"[lane] if "{axis}" in fmt else "") for lane in x.arg]
    return lanes[0] if len(lanes) == 1 else ctx.vector(x.dtype, lanes)


# how the walk treats each op's text: given inline (the text is the value), declared as a named value (the prefix
# of its name), or a statement (everything else); RANGE and SPECIAL are named by their arg
_INLINE = frozenset({Ops.CONST, Ops.VCONST, Ops.AFTER, Ops.INDEX, Ops.GEP})
_DECLARED = {Ops.LOAD: "val", Ops.CAST: "cast", Ops.BITCAST: "bits", Ops.VECTORIZE: "vec", Ops.SHUFFLE: "shfl"} | (
    dict.fromkeys(GroupOp.ALU, "alu")
)
_NAMED_STMT = {Ops.DEFINE_REG: "acc", Ops.DEFINE_LOCAL: "smem"}


class CStyleRenderer(Renderer):
    """The C-family renderer: the rules of ``string_rewrite`` and one walk over the linear uops (``render``).

    Class attributes spell the language: ``kernel_prefix`` (before the kernel's name, e.g.
    ``__global__ void``), ``buffer_prefix``/``buffer_suffix``/``const_buffer_prefix`` (around a
    buffer parameter's type), ``var_type`` (the C type of a scalar variable: ``int``, as the
    runtime passes int32), ``smem_prefix`` (local memory), ``barrier`` (a workgroup barrier
    statement), ``launch_index`` (GPU-style index spellings), ``vector_format`` (a vector of lanes:
    ``{type}``, ``{vtype}``, ``{parts}``), ``lane_format`` (one lane: ``{vec}``, ``{lane}``, ``{axis}``)
    and ``type_map`` (dtype -> C type; see the module docstring for what each compiler accepts).
    """

    kernel_prefix = "void"
    buffer_prefix = ""
    buffer_suffix = " restrict"
    const_buffer_prefix = "const "
    var_type = "int"
    smem_prefix = ""
    barrier = ""
    line_prefix = "  "
    # GPU-style renderers spell their launch indices here: "gidx"/"lidx" -> a format of {axis} (x, y, z)
    launch_index: dict[str, str] = {}
    vector_format = "(({type}){{{parts}}})"  # a compound literal; C++ dialects use a make_ function
    lane_format = "{vec}[{lane}]"  # a clang vector extension; CUDA uses {vec}.{axis}
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
    string_rewrite = PatternMatcher(base_rules, result=str)

    # ----- type names -----
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

    def render_uop(self, u: UOp, names: dict[UOp, str] | None = None) -> str:
        """The text the rules give ``u`` alone, its sources named by ``names`` (for tests and tools)."""
        ctx = RenderContext(self)
        ctx.names.update(names or {})
        return ctx.text(u)

    def render_kernel(self, name: str, params: list[str], body: list[str], uops: list[UOp]) -> str:
        """The whole source: the kernel ``name`` (the name the runtime's ``load`` resolves) around its body.

        Override to add a prelude (includes, helpers) or launch bounds; ``uops`` is the kernel for inspection.
        """
        return f"{self.kernel_prefix} {name}({', '.join(params)}) {{\n" + "\n".join(body) + "\n}\n"

    # ----- the walk -----
    def render(self, name: str, uops: list[UOp]) -> str:
        """Linear uops -> source: parameters (buffers by slot, then variables by name), then one statement per uop."""
        written = frozenset(
            s.src[0].src[0] for s in uops if s.op is Ops.STORE and s.src[0].src[0].op is Ops.DEFINE_GLOBAL
        )
        ctx = RenderContext(self, written)
        r = ctx.names
        params: list[str] = []
        for u in sorted((u for u in uops if u.op is Ops.DEFINE_GLOBAL), key=lambda u: u.arg):
            r[u] = f"data{u.arg}"
            params.append(ctx.text(u))
        for u in sorted((u for u in uops if u.op is Ops.DEFINE_VAR), key=lambda u: u.arg[0]):
            r[u] = u.arg[0]
            params.append(ctx.text(u))
        return self.render_kernel(name, params, self._body(ctx, uops), uops)

    def _body(self, ctx: RenderContext, uops: list[UOp]) -> list[str]:
        """One line per statement and declared value, indented by the loops open around it."""
        r, body, depth, counters = ctx.names, [], 1, dict[str, int]()
        for u in uops:
            op = u.op
            if op is Ops.DEFINE_GLOBAL or op is Ops.DEFINE_VAR:
                continue
            prefix = _DECLARED.get(op) or _NAMED_STMT.get(op)
            if prefix is not None:
                counters[prefix] = (n := counters.get(prefix, 0)) + 1
                r[u] = f"{prefix}{n}"
            elif op is Ops.RANGE:
                r[u] = f"ridx{u.arg[0]}"
            elif op is Ops.SPECIAL:
                r[u] = u.arg
            text = ctx.text(u)
            if op in _INLINE:
                r[u] = text
                continue
            if op is Ops.END:
                depth -= 1
            if op is Ops.SPECIAL:
                text = f"{ctx.dtype(u.dtype)} {u.arg} = {text}; /* < {ctx.get(u.src[0], '?')} */"
            elif op in _DECLARED:
                text = f"{ctx.dtype(u.dtype)} {r[u]} = {text};"
            if text:
                body.append(self.line_prefix * depth + text)
            if op is Ops.RANGE:
                depth += 1
        return body


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
