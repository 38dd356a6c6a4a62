"""SIR (statement IR): the tensor program recorded while simulating bytecode, and its compilation."""
from .sir import MetaInfo, Statement, StatementIR, Symbol

__all__ = ["MetaInfo", "Statement", "StatementIR", "Symbol"]
