"""The symbolic simulation of bytecode: one handler per opcode, variables by kind, trackers, guards."""
