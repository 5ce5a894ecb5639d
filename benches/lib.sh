# Shared by benches/run.sh and benches/scale.sh (sourced, not run).

# "SECS KIB" of one command (wall clock, peak RSS from GNU time), its output discarded.
measure() {
  local report
  report=$(mktemp)
  /usr/bin/time -o "$report" -f '%e %M' "$@" >/dev/null 2>&1 || true
  tail -n 1 "$report"
  rm -f "$report"
}

# Rewrite a log so its page-cache pages are fresh, then read it once. On the VM the README
# figures come from, pages that sat idle for a while read ~5x slower (dd: 1.0 s per GiB against
# 0.2 s after a rewrite; the host reclaims idle guest memory), which swamps what is measured.
# FRESH=0 keeps the file as it is.
fresh() {
  if [ "${FRESH:-1}" != 0 ]; then cp "$1" "$1.fresh" && mv "$1.fresh" "$1"; fi
  cat "$1" > /dev/null
}

# Read a log once right before a command is timed, so every command starts from the same
# page-cache state: on the VM of the README, the command run right after `jq` (13 s of small
# reads) spent ~50 % more system time reading the same cached file than one run right after
# any full read of it (validate: 1.26-1.31 s after jq, 1.19-1.23 s after `cat`). SETTLE=0
# skips it.
settle() {
  if [ "${SETTLE:-1}" != 0 ]; then cat "$1" > /dev/null; fi
}
