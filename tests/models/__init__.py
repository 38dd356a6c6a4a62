"""Model zoo tests: whole real models translated, compared with eager Paddle (see zoo.py and harness.py)."""
