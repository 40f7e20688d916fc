#!/bin/sh
# Run once by the postgres image, as its superuser, when it initialises an empty data
# directory: creates the service's role (LOGIN, no superuser, no other privilege) and
# its database, owned by that role. The nodes connect as that role: the owner creates
# the service's tables, functions, triggers and the trusted extension pg_trgm itself,
# and needs nothing more (docs/postgres.md, "Backups and restore").
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "${POSTGRES_DB:-$POSTGRES_USER}" \
	-v pw="$DATASERVICE_DB_PASSWORD" <<'SQL'
CREATE ROLE dataservice LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD :'pw';
CREATE DATABASE dataservice OWNER dataservice;
SQL
