# SPDX-License-Identifier: Apache-2.0
"""The package under test is the checkout's (python/), over the libkdag
named by $KDAG_LIBRARY (ctest sets it to the build's) or the installed
one. $KDAG_NULL_DRIVER names the null CUDA driver for the CUDA-session
tests on a machine without a GPU."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
