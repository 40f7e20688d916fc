package store

import "strings"

// The checks of what lies outside the service's schema (current_schema(): the URL's
// search_path, public by default, postgresDSN) yet reaches its statements: other
// schemas and their objects (a function an index or a trigger could call by its
// qualified name), extensions other than pg_trgm (and plpgsql, built in), members
// added to pg_trgm (ALTER EXTENSION pg_trgm ADD FUNCTION …: the member checks above
// leave extension members out), and settings of the database or the role that
// change what the service's SQL does. Each is one catalog query, run with the
// others at every open.

// pgSystemSchema is a condition true when the schema named by the column nsp is one
// of PostgreSQL's own.
func pgSystemSchema(nsp string) string {
	return `(` + nsp + ` IN ('pg_catalog', 'information_schema') OR ` + nsp + ` LIKE 'pg\_toast%' OR ` + nsp + ` LIKE 'pg\_temp\_%')`
}

// pgTrgmFunction is a condition true when the function of oid is one of pg_trgm's
// own: C code of its library (a function added to the extension is SQL or PL/pgSQL,
// and only a superuser creates a C function).
func pgTrgmFunction(oid string) string {
	return `EXISTS (SELECT 1 FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
		WHERE p.oid = ` + oid + ` AND l.lanname = 'c' AND p.probin = '$libdir/pg_trgm')`
}

// settingsRefused are the settings (lower case) a database or role may not carry for
// the service's database: each changes what its statements do or who runs them.
// search_path is also set on every connection (postgresDSN), so a database's cannot
// redirect names; it is still refused, so the operator learns it is ignored. Timeouts,
// memory, planner and logging settings are left alone, and so are the default
// isolation and deferrability: every transaction of the service sets its own.
var settingsRefused = []string{
	"search_path", "role", "session_authorization", "session_replication_role",
	"default_transaction_read_only",
	"transform_null_equals", "standard_conforming_strings", "backslash_quote", "array_nulls",
	"check_function_bodies", "row_security", "session_preload_libraries", "local_preload_libraries",
	"lo_compat_privileges", "exit_on_error", "default_table_access_method", "client_encoding",
}

func init() {
	refused := make([]string, len(settingsRefused))
	for i, s := range settingsRefused {
		refused[i] = "'" + s + "'"
	}
	postgresChecks = append(postgresChecks,
		postgresCheck{what: "schema", query: `SELECT '', n.nspname, n.nspname, '' FROM pg_namespace n
			WHERE NOT ` + pgSystemSchema("n.nspname") + ` AND n.nspname <> current_schema() AND n.nspname <> 'public' ORDER BY 2`,
			judge: func(*postgresRef, string, string, string, string) (string, bool) { return "schema", false }},
		// Every object of another schema but PostgreSQL's own (an empty public beside
		// a service schema of another name is no harm); in the service's schema, the
		// kinds the other checks do not read, extensions' members left out.
		postgresCheck{what: "objects of other schemas", query: `SELECT x.kind, n.nspname || '.' || x.name, n.nspname || '.' || x.name, ''
			FROM (SELECT 'pg_class'::regclass AS cat, oid, relname::text AS name, relnamespace AS nsp, CASE relkind WHEN 'i' THEN 'index'
					WHEN 'I' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 'v' THEN 'view' ELSE 'table' END AS kind FROM pg_class
				UNION ALL SELECT 'pg_proc'::regclass, oid, proname::text, pronamespace, CASE prokind WHEN 'a' THEN 'aggregate'
					WHEN 'p' THEN 'procedure' ELSE 'function' END FROM pg_proc
				UNION ALL SELECT 'pg_type'::regclass, oid, typname::text, typnamespace, 'type' FROM pg_type
				UNION ALL SELECT 'pg_operator'::regclass, oid, oprname::text, oprnamespace, 'operator' FROM pg_operator
				UNION ALL SELECT 'pg_collation'::regclass, oid, collname::text, collnamespace, 'collation' FROM pg_collation
				UNION ALL SELECT 'pg_conversion'::regclass, oid, conname::text, connamespace, 'conversion' FROM pg_conversion
				UNION ALL SELECT 'pg_opclass'::regclass, oid, opcname::text, opcnamespace, 'operator class' FROM pg_opclass
				UNION ALL SELECT 'pg_opfamily'::regclass, oid, opfname::text, opfnamespace, 'operator family' FROM pg_opfamily
				UNION ALL SELECT 'pg_ts_config'::regclass, oid, cfgname::text, cfgnamespace, 'text search configuration' FROM pg_ts_config
				UNION ALL SELECT 'pg_ts_dict'::regclass, oid, dictname::text, dictnamespace, 'text search dictionary' FROM pg_ts_dict
				UNION ALL SELECT 'pg_ts_parser'::regclass, oid, prsname::text, prsnamespace, 'text search parser' FROM pg_ts_parser
				UNION ALL SELECT 'pg_ts_template'::regclass, oid, tmplname::text, tmplnamespace, 'text search template' FROM pg_ts_template
				UNION ALL SELECT 'pg_statistic_ext'::regclass, oid, stxname::text, stxnamespace, 'statistics object' FROM pg_statistic_ext
			) x JOIN pg_namespace n ON n.oid = x.nsp
			WHERE NOT ` + pgSystemSchema("n.nspname") + ` AND (n.nspname <> current_schema()
				OR x.cat NOT IN ('pg_class'::regclass, 'pg_proc'::regclass, 'pg_type'::regclass, 'pg_operator'::regclass)
					AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = x.cat AND d.objid = x.oid AND d.deptype = 'e'))
			ORDER BY 2`,
			judge: func(_ *postgresRef, kind, _, _, _ string) (string, bool) { return kind, false }},
		postgresCheck{what: "extension", query: `SELECT '', e.extname, e.extname, '' FROM pg_extension e
			WHERE e.extname NOT IN ('plpgsql', 'pg_trgm') ORDER BY 2`,
			judge: func(*postgresRef, string, string, string, string) (string, bool) { return "extension", false }},
		// pg_trgm's members are its C functions, the operators and the type those
		// implement, and its operator classes and families (whose support functions
		// the next check reads).
		postgresCheck{what: "extension member", query: `SELECT '', pg_describe_object(d.classid, d.objid, d.objsubid), e.extname, ''
			FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
			WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e' AND e.extname = 'pg_trgm' AND NOT CASE d.classid
				WHEN 'pg_proc'::regclass THEN ` + pgTrgmFunction("d.objid") + `
				WHEN 'pg_operator'::regclass THEN ` + pgTrgmFunction("(SELECT o.oprcode FROM pg_operator o WHERE o.oid = d.objid)") + `
				WHEN 'pg_type'::regclass THEN ` + pgTrgmFunction("(SELECT t.typinput FROM pg_type t WHERE t.oid = d.objid)") + `
				WHEN 'pg_opclass'::regclass THEN true
				WHEN 'pg_opfamily'::regclass THEN true
				ELSE false END ORDER BY 2`,
			judge: func(*postgresRef, string, string, string, string) (string, bool) {
				return "member of the extension", false
			}},
		postgresCheck{what: "operator family support function", query: `SELECT '', f.opfname || ' support ' || ap.amproc::regprocedure::text, f.opfname, ''
			FROM pg_amproc ap JOIN pg_opfamily f ON f.oid = ap.amprocfamily JOIN pg_namespace n ON n.oid = f.opfnamespace
			JOIN pg_proc p ON p.oid = ap.amproc
			WHERE NOT ` + pgSystemSchema("n.nspname") + ` AND p.pronamespace <> 'pg_catalog'::regnamespace AND NOT ` + pgTrgmFunction("p.oid") + ` ORDER BY 2`,
			judge: func(*postgresRef, string, string, string, string) (string, bool) {
				return "operator family function", false
			}},
		// Settings of this database or of every database, for this role or every role.
		postgresCheck{what: "setting", query: `SELECT '', split_part(c, '=', 1),
				CASE WHEN s.setdatabase = 0 AND s.setrole = 0 THEN 'every database and role'
				WHEN s.setdatabase = 0 THEN 'role ' || quote_ident(current_user) || ' in every database'
				WHEN s.setrole = 0 THEN 'database ' || quote_ident(current_database())
				ELSE 'role ' || quote_ident(current_user) || ' in database ' || quote_ident(current_database()) END, c
			FROM pg_db_role_setting s, unnest(s.setconfig) c
			WHERE s.setdatabase IN (0, (SELECT oid FROM pg_database WHERE datname = current_database()))
				AND s.setrole IN (0, (SELECT oid FROM pg_roles WHERE rolname = current_user))
				AND (lower(split_part(c, '=', 1)) IN (` + strings.Join(refused, ", ") + `) OR lower(c) LIKE 'plpgsql.%') ORDER BY 2`,
			judge: func(*postgresRef, string, string, string, string) (string, bool) { return "setting", false }},
	)
}
