"""The IR: UOps, the rewrite engine and the symbolic rules.

Loading the package loads `uops.ir.symbolic`, which installs ``UOp.simplify``'s rules into
`uops.ir.uop` (the rules are built from UOps, so uop.py cannot import them).
"""

from uops.ir import symbolic as _symbolic

del _symbolic
