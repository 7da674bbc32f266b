#!/bin/sh
# tests/fault/elastic_durable_all_lost.sh with the durable tier's upload, download and remove
# commands (cp and rm into a directory that stands for an object store) instead of a directory:
# every node of a 4-worker job and the head's copy are lost, and the head downloads the durable
# copy to resume it.
DURABLE_TIER=command
. "$HV_SRC_DIR/tests/fault/elastic_durable_all_lost.sh"
