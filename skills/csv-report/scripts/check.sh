#!/bin/sh
# Count the rows of a CSV and those without exactly two columns.
set -eu
rows=$(wc -l < "$1")
bad=$(awk -F, 'NF != 2' "$1" | wc -l)
echo "$rows rows, $bad without two columns"
