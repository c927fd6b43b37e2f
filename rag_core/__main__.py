"""`python -m rag_core` and the `docchat` command: the command line lives in rag_core/adapters/cli/main.py."""
from rag_core.adapters.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
