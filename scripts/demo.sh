#!/usr/bin/env bash
# Compiles the Silero VAD model bundled in the silero-vad pip package with Kiln (silero_vad.onnx,
# whose If on the `sr` input picks its 16 kHz or 8 kHz network: one entry per rate), synthesises
# a few seconds of speech with espeak-ng, and runs the compiled model over it as a stream, at
# 16 kHz and at 8 kHz.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

bash scripts/setup.sh

OUT=build/demo
mkdir -p "$OUT"

# The wheel's model file; find_spec locates the package without importing it (importing
# silero_vad would need torch, which we do not install).
MODEL="$(build/venv/bin/python - <<'PY'
import importlib.util, os
spec = importlib.util.find_spec("silero_vad")
path = os.path.join(list(spec.submodule_search_locations)[0], "data", "silero_vad.onnx")
if not os.path.isfile(path):
    raise SystemExit(f"silero_vad.onnx not found at {path}")
print(path)
PY
)"
echo "[demo] model: $MODEL"

echo "[demo] kiln compile -> $OUT/silero_vad.kiln"
build/kiln compile "$MODEL" -o "$OUT/silero_vad.kiln"

echo "[demo] synthesising speech with espeak-ng"
# Two utterances with a 1.5 s pause between them (SSML break), so the detector has speech
# to find on both sides of a silence (a comma pause inside a sentence may split it further).
espeak-ng -m -v en -s 150 -w "$OUT/speech.wav" \
  "<speak>Kiln compiles neural networks ahead of time. <break time=\"1500ms\"/> This voice activity detector runs on the Kiln runtime, one chunk of thirty two milliseconds at a time.</speak>"
# 16 kHz mono float32 samples, with one second of silence before and after the speech.
sox "$OUT/speech.wav" -r 16000 -c 1 -e float -b 32 -t raw "$OUT/speech.f32" gain -n -3 pad 1 1
echo "[demo] audio: $OUT/speech.f32 ($(($(stat -c %s "$OUT/speech.f32") / 4)) samples at 16 kHz)"

echo "[demo] running the compiled model over the audio stream (16 kHz)"
build/samples/vad_stream "$OUT/silero_vad.kiln" "$OUT/speech.f32"
sox -t raw -r 16000 -c 1 -e float -b 32 "$OUT/speech.f32" -t raw -r 8000 "$OUT/speech8k.f32"
echo "[demo] the same audio at 8 kHz: the artifact's 8 kHz entry"
build/samples/vad_stream "$OUT/silero_vad.kiln" "$OUT/speech8k.f32" 8000
