# vendored for uops: only the 2024.12 stubs are kept (upstream imports every revision here)
from . import _2024_12
