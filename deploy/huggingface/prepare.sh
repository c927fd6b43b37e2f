#!/bin/sh
# Assemble a Hugging Face Space (Docker SDK) from this repository into SPACE_DIR:
#   - the build context, exactly the files the repository's .dockerignore lets into an image (python -m deploy.image);
#   - Dockerfile: the repository's Dockerfile with deploy/huggingface/Dockerfile.space appended;
#   - README.md: the Space's metadata block (sdk: docker, app_port: 8501, …) and its settings;
#   - .gitattributes: the binary samples go through Git LFS (the Hub refuses binary files in plain git).
# SPACE_DIR may be a clone of your Space (its .git is kept) or a new folder. Then push it; see docs/deployment.md.
#   deploy/huggingface/prepare.sh ../my-space && cd ../my-space && git add -A && git commit -m DocChat && git push
set -eu

dest=${1:?usage: deploy/huggingface/prepare.sh SPACE_DIR}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=${PYTHON:-python3}

mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
case "$dest" in "$root" | "$root"/*) echo "SPACE_DIR must be outside the repository ($root)" >&2; exit 2 ;; esac
# Only an empty folder, a bare clone, or a folder this script filled before is replaced (never someone's files).
others=$(ls -A "$dest" | grep -v -x -e .git -e .gitattributes -e README.md || true)
if [ -n "$others" ] && ! grep -q "by deploy/huggingface/prepare.sh" "$dest/Dockerfile" 2>/dev/null; then
    echo "$dest holds other files; use an empty folder or a fresh clone of your Space" >&2
    exit 2
fi
find "$dest" -mindepth 1 -maxdepth 1 ! -name .git -exec rm -rf {} +

(cd "$root" && "$python" -m deploy.image copy-context "$dest" "$root")
cat "$root/Dockerfile" "$here/Dockerfile.space" > "$dest/Dockerfile"
cp "$root/.dockerignore" "$dest/.dockerignore"
cp "$here/README.md" "$dest/README.md"
cat > "$dest/.gitattributes" <<'ATTR'
*.pdf filter=lfs diff=lfs merge=lfs -text
*.docx filter=lfs diff=lfs merge=lfs -text
*.png filter=lfs diff=lfs merge=lfs -text
ATTR

echo "Space ready in $dest ($(find "$dest" -type f ! -path '*/.git/*' | wc -l) files)."
echo "Push it: cd $dest && git lfs install && git add -A && git commit -m 'DocChat demo' && git push"
echo "     or: hf upload <you>/<space> $dest . --repo-type=space"
