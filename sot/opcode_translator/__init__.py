"""From a Python frame to translated code: skip policy, guarded cache, executor and code generation."""
