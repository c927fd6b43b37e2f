#!/bin/sh
# Check the Docker image without a Docker engine: install a clean virtual environment exactly as the Dockerfile
# installs the image (same pip commands, flags and ENV, from the build context .dockerignore leaves), run the
# Dockerfile's command as its non-root uid with writable data and home folders, and require the HEALTHCHECK URL to
# answer 200. Prints what it measured as JSON. See docs/deployment.md ("Checking the image without Docker").
#   scripts/check_image.sh                    the repository's Dockerfile (local mode)
#   scripts/check_image.sh --env DOCCHAT_MODE=demo --browser
#   scripts/check_image.sh --space --browser  the Hugging Face Space (deploy/huggingface/prepare.sh's folder)
#   scripts/check_image.sh --no-cache         download every package again, as `docker build` does
set -eu
cd "$(dirname "$0")/.."
py=.venv/bin/python
[ -x "$py" ] || py=python3
exec "$py" -m deploy.check_image "$@"
