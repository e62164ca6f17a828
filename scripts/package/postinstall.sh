#!/bin/sh
# Run by the .deb and .rpm packages after install: the unit's system user (slotsync, peer
# authentication's name for the role of the same name), and systemd told of the new unit. No
# step needs PostgreSQL or a postgres user on the host.
set -e
if ! getent passwd slotsync >/dev/null 2>&1; then
	if command -v useradd >/dev/null 2>&1; then
		useradd --system --user-group --home-dir /var/lib/slotsync --no-create-home --shell /usr/sbin/nologin slotsync
	else
		adduser --system --group --home /var/lib/slotsync --no-create-home slotsync
	fi
fi
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload || true
fi
exit 0
