"""`lakegc warehouse gc`: one live set for everything under a prefix (see gc.py)."""
