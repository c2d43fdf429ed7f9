# Sourced by GPU checks that need cuFile to accept files on the accelerator
# machine's root disk: libcufile asks udev's database for the filesystem of
# the block device (ID_FS_USAGE and friends) and answers 5027 where it has no
# entry, as there. udev_root_setup PATH writes the entry for the device that
# holds PATH (what udev writes on a normal machine) unless one exists, and
# says so; udev_root_remove takes away only what it wrote. Needs root.
udev_root_entry=""
udev_root_setup() {
  local path=$1 dev maj min uuid
  dev=$(stat -c '%d' "$path" 2>/dev/null) || return 1
  maj=$((dev >> 8 & 0xfff))
  min=$(((dev & 0xff) | (dev >> 12 & 0xfff00)))
  local entry="/run/udev/data/b$maj:$min"
  if [ -e "$entry" ]; then
    echo "INFO udev: $entry exists already; left as it is"
    return 0
  fi
  uuid=$(findmnt -n -o UUID --target "$path" 2>/dev/null)
  [ -n "$uuid" ] || uuid=$(cat /proc/sys/kernel/random/uuid)
  mkdir -p /run/udev/data || return 1
  printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=%s\nE:ID_FS_UUID=%s\n' \
    "$(findmnt -n -o FSTYPE --target "$path" 2>/dev/null || echo ext4)" "$uuid" >"$entry" || return 1
  udev_root_entry=$entry
  echo "INFO udev: wrote $entry (ID_FS_USAGE=filesystem, ID_FS_UUID=$uuid) so that cuFile accepts files under $path; removed at the end"
}
udev_root_remove() {
  if [ -n "$udev_root_entry" ]; then
    rm -f "$udev_root_entry" && echo "INFO udev: removed $udev_root_entry"
    udev_root_entry=""
  fi
}
