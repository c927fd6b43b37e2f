#!/bin/sh
# Make sure Tesseract OCR and its language packs (English, German, French, Spanish, Arabic) are present, for reading
# scanned PDF pages (docs/ocr.md). Installed with apt when missing and we are root; otherwise a warning, and scanned
# files are refused with a sentence saying how to enable OCR. More languages: OCR_LANGS="eng deu ita" sh this-script.
langs="${OCR_LANGS:-eng deu fra spa ara}"
missing=""
command -v tesseract >/dev/null 2>&1 || missing="$missing tesseract-ocr"
for lang in $langs; do
  found=""
  for dir in "${TESSDATA_PREFIX:-}" /usr/share/tesseract-ocr/*/tessdata /usr/share/tessdata; do
    [ -n "$dir" ] && [ -f "$dir/$lang.traineddata" ] && found=1 && break
  done
  [ -n "$found" ] || missing="$missing tesseract-ocr-$lang"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing Debian's$missing for reading scanned PDFs..."
  # shellcheck disable=SC2086
  (apt-get install -y -q $missing >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q $missing >/dev/null)) \
    && exit 0
fi
echo "WARNING:$missing missing and could not be installed; scanned PDFs will be refused (see docs/ocr.md)." >&2
exit 0
