"""Opcode handlers, one module per family; importing a module registers its handlers."""
