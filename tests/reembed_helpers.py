"""What the two re-embedding test modules share (tests/integration/test_reembed.py for Qdrant Edge,
test_reembed_server.py for a server library): the six one-line documents, the model switched to and
what the Ollama-protocol test server serves for it (FAKED vectors: no Ollama runs here), and the end of the child process that a
test SIGKILLs half-way (it opens the library, starts the re-embedding and writes its status to a file until killed)."""
from __future__ import annotations

NEW = "ollama:fake-embed"
EMBED_MODELS = {"fake-embed": 24}  # what the Ollama-protocol test server serves for /api/embed (FAKED vectors)
TOPICS = ["Brussels is the capital of Belgium.", "Lisbon is the capital of Portugal.",
          "Vienna is the capital of Austria.", "Dublin is the capital of Ireland.",
          "Warsaw is the capital of Poland.", "Prague is the capital of Czechia."]
# The child's last lines: `settings` made by the lines before; argv[4] is the status file.
CHILD_STATUS_LOOP = """
library, job = open_for_model(settings)
out = Path(sys.argv[4])
while True:
    status = job.status()
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps({"done": status.done, "total": status.total, "state": str(status.state)}))
    tmp.replace(out)
    time.sleep(0.02)
"""
