"""What a model file imports: vectors and functions that take symbolic expressions and numbers alike.

```python
from armillary.model import dot, cross, norm, sqrt, exp, sin, cos, log
```
See :mod:`armillary.kernels.models` for what a model file declares per space.
"""

from armillary.kernels.models.symbolic import (Matrix, Vector, atan2, cos, cross, dot, exp, log, matmul, norm, sin,
                                               sqrt, tan)

__all__ = ["dot", "cross", "norm", "sqrt", "exp", "log", "sin", "cos", "tan", "atan2", "matmul", "Vector", "Matrix"]
