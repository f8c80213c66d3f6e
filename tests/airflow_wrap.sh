#!/usr/bin/env bash
# The Airflow test's stand-in for `idem` (IDEM_BIN): logs every call to
# $CALLS, and SIGKILLs the first call of stage $FAIL_STAGE for date
# $FAIL_DATE inside its commit (data files written, log entry not), as a
# crashed worker would be. Every other call is the real idem ($REAL_IDEM).
echo "$*" >> "$CALLS"
case "$*" in
  *"--logical-date ${FAIL_DATE} "*"--stage ${FAIL_STAGE}")
    if mkdir "$MARK" 2>/dev/null; then
      IDEM_FAULT_BARRIER="before-log-write:2:$MARK/at" "$REAL_IDEM" "$@" &
      pid=$!
      for _ in $(seq 600); do
        [ -n "$(ls -A "$MARK/at" 2>/dev/null)" ] && break
        sleep 0.1
      done
      [ -n "$(ls -A "$MARK/at" 2>/dev/null)" ] || { echo "never reached the commit" >&2; exit 99; }
      kill -9 "$pid"
      wait "$pid"
      exit $?
    fi
    ;;
esac
exec "$REAL_IDEM" "$@"
