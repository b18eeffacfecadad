#!/usr/bin/env bash
# GPU side of benchmarks/profile_wan.py (copied to the bundle as run.sh by `prepare`).
#   bash .gpu/h-profile/run.sh vae|pipe [SIZE FRAMES STEPS]   # from the checkout's root
# Needs torch (+ CUDA for the memory figures); installs the bundle's wheels into /tmp/site.
set -uo pipefail
B="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-/tmp/profile-wan-out}"; mkdir -p "$OUT"; export OUT
SIZE="${2:-480p}"; FRAMES="${3:-81}"; STEPS="${4:-4}"
W=(--size "$SIZE" --frames "$FRAMES" --steps "$STEPS")
SITE="${LL_SITE:-/tmp/site}"
if [ ! -d "$SITE/diffusers" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$B"/whl/*.whl || exit 1
fi
export PYTHONPATH="$SITE:$B/src" PYTHONUNBUFFERED=1
PROJECT='[project]\nname = "bench"\nversion = "0"\ndependencies = ["lifetime-lint"]\n'
LL=(python3 -P -m lifetime_lint)  # -P: never the checkout's own lifetime_lint/ from the cwd
step() { echo "=== $(date -u +%T) $*"; }
case "$1" in
  vae)
    WAN="$SITE/diffusers/models/autoencoders/autoencoder_kl_wan.py"
    rm -rf /tmp/wanfix && mkdir -p /tmp/wanfix && cp "$WAN" /tmp/wanfix/ && printf "$PROJECT" > /tmp/wanfix/pyproject.toml
    step variants
    python3 "$B/profile_wan.py" variants --file /tmp/wanfix/autoencoder_kl_wan.py --out /tmp/wanvar
    "${LL[@]}" check --no-cache --fix --exit-zero -q /tmp/wanfix/autoencoder_kl_wan.py
    cp /tmp/wanfix/autoencoder_kl_wan.py /tmp/wanvar/all_safe.py
    diff -u "$WAN" /tmp/wanvar/all_safe.py > "$OUT/vae_fix.diff"
    CASES="${VAE_CASES:-480p-untiled,480p-tiled,720p-untiled,720p-tiled}"
    [ -n "${SKIP_PROFILE:-}" ] && PROFILED= || PROFILED="${CASES//,/ }"
    for case in $PROFILED; do
      size=${case%-*}; flag=; [ "${case#*-}" = tiled ] && flag=--tiled
      step "plain $case"  # the same program without the profile: the overhead's baseline
      (cd /tmp && python3 "$B/profile_wan.py" vae --size "$size" --frames "$FRAMES" $flag)
      step "profile $case"
      (cd /tmp && "${LL[@]}" profile --device "${LL_DEVICE:-auto}" --include "*/autoencoder_kl_wan.py" \
        --save "$OUT/vae_profile_$case.json" --output-format concise \
        "$B/profile_wan.py" vae --size "$size" --frames "$FRAMES" $flag)
    done
    step verify
    python3 "$B/profile_wan.py" vae-verify --file /tmp/wanvar --cases "$CASES" --frames "$FRAMES" --save "$OUT/vae_verify.json"
    ;;
  pipe-quick)  # the pipeline as installed and after check --fix of the whole package
    rm -rf /tmp/pipefix && mkdir -p /tmp/pipefix && cp -r "$SITE/diffusers" /tmp/pipefix/ && printf "$PROJECT" > /tmp/pipefix/pyproject.toml
    step "pipeline as installed"
    python3 "$B/profile_wan.py" pipe "${W[@]}" --save "$OUT/pipe_before.json"
    step "check --fix of the whole package"
    (cd /tmp && "${LL[@]}" check --no-cache --fix --exit-zero --statistics -j "$(nproc)" /tmp/pipefix/diffusers | tail -12)
    (cd /tmp && diff -ru "$SITE/diffusers" pipefix/diffusers > "$OUT/pipe_fix.diff"); grep -c '^+++' "$OUT/pipe_fix.diff"
    step "pipeline fixed"
    PYTHONPATH="/tmp/pipefix:$PYTHONPATH" python3 "$B/profile_wan.py" pipe "${W[@]}" --save "$OUT/pipe_fixed.json"
    ;;
  pipe)
    rm -rf /tmp/pipe /tmp/pipefix && mkdir -p /tmp/pipe && cp -r "$SITE/diffusers" /tmp/pipe/ && printf "$PROJECT" > /tmp/pipe/pyproject.toml
    step "pipeline as installed"
    python3 "$B/profile_wan.py" pipe "${W[@]}" --save "$OUT/pipe_before.json"
    step "profile"
    (cd /tmp/pipe && PYTHONPATH="/tmp/pipe:$PYTHONPATH" "${LL[@]}" profile --device "${LL_DEVICE:-auto}" \
      --save "$OUT/pipe_profile.json" --output-format concise "$B/profile_wan.py" pipe "${W[@]}") > "$OUT/pipe_profile.txt"
    grep -c measured "$OUT/pipe_profile.txt"; grep -v "not executed" "$OUT/pipe_profile.txt" | head -40
    step "check --fix of the whole package"
    cp -r /tmp/pipe /tmp/pipefix
    "${LL[@]}" check --no-cache --fix --exit-zero -q -j "$(nproc)" /tmp/pipefix/diffusers > /dev/null
    (cd /tmp && diff -ru pipe/diffusers pipefix/diffusers > "$OUT/pipe_fix.diff"); grep -c '^+++' "$OUT/pipe_fix.diff"
    step "pipeline fixed"
    PYTHONPATH="/tmp/pipefix:$PYTHONPATH" python3 "$B/profile_wan.py" pipe "${W[@]}" --save "$OUT/pipe_fixed.json"
    step "profile fixed (the functions traced before)"
    python3 - "$OUT/pipe_profile.json" > /tmp/watch.json <<'PY'
import json, os, sys
run = json.load(open(sys.argv[1]))
print(json.dumps([[os.path.relpath(f["filename"], "/tmp/pipe"), f["function"]] for f in run["functions"]]))
PY
    (cd /tmp/pipefix && PYTHONPATH="/tmp/pipefix:$PYTHONPATH" "${LL[@]}" profile --device "${LL_DEVICE:-auto}" \
      --watch-functions /tmp/watch.json --save "$OUT/pipe_profile_fixed.json" --output-format concise \
      "$B/profile_wan.py" pipe "${W[@]}") > /dev/null
    python3 "$B/profile_wan.py" compare --profile "$OUT/pipe_profile.json" --after "$OUT/pipe_profile_fixed.json" | tee "$OUT/pipe_compare.txt"
    step "one fix at a time"
    python3 "$B/profile_wan.py" pipe-variants --profile "$OUT/pipe_profile.json" --file /tmp/pipe --top "${TOP:-4}" "${W[@]}" --save "$OUT/pipe_variants.json"
    ;;
esac
step done
