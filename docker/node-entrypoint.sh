#!/bin/sh
# Entrypoint of splitbrain/node containers.
#   SPLITBRAIN_SSH_AUTHORIZED_KEY=<public key>  append it to root's authorized_keys and start sshd
#   SPLITBRAIN_SSHD=1                           start sshd (keys must come from elsewhere)
# Host keys are generated per container (the image ships none), then the command runs as PID 1's child.
set -eu
if [ -n "${SPLITBRAIN_SSH_AUTHORIZED_KEY:-}" ]; then
  mkdir -p /root/.ssh
  chmod 700 /root/.ssh
  printf '%s\n' "$SPLITBRAIN_SSH_AUTHORIZED_KEY" >> /root/.ssh/authorized_keys
  chmod 600 /root/.ssh/authorized_keys
  SPLITBRAIN_SSHD=1
fi
if [ "${SPLITBRAIN_SSHD:-0}" = 1 ]; then
  for t in ed25519 ecdsa; do
    [ -f "/etc/ssh/ssh_host_${t}_key" ] || ssh-keygen -q -t "$t" -N '' -f "/etc/ssh/ssh_host_${t}_key"
  done
  mkdir -p /run/sshd
  /usr/sbin/sshd -e -o HostKey=/etc/ssh/ssh_host_ed25519_key -o HostKey=/etc/ssh/ssh_host_ecdsa_key
fi
exec "$@"
