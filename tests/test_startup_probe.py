"""What a fresh process pays before it computes: a probe of the pinned torch that docs/reference.md ("Where the
time goes") rests on. Importing torch does not load torch._dynamo; the first gradient through torch.func does
(its _autograd_grad enters torch._dynamo.compiled_autograd), so every bench run that takes the vectorised path
pays for dynamo's import once. If a torch upgrade makes this false, the note and this test go."""
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # a fresh interpreter: `make test` runs it, `make test-fast` does not

PROBE = """
import sys, torch
before = "torch._dynamo" in sys.modules
torch.func.grad(lambda w: (w * w).sum())(torch.ones(3))
print(before, "torch._dynamo" in sys.modules)
"""


def test_the_first_functorch_gradient_imports_dynamo_and_importing_torch_does_not():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "True"], out.stdout
