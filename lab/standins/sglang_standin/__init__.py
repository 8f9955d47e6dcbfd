"""The SGLang server STAND-IN's parts, one concern each (NOT SGLang: it loads no model and runs no kernel).

`../sglang_server_standin.py` is the command the lab's unit runs; it only calls `lifecycle.main`. What the parts
are and what each answers like: lab/standins/README.md. Python 3 standard library only: the stand-in runs inside
the deployed venv, which has no torch or fastapi. Production never installs it.
"""
