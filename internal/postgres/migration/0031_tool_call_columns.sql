-- An execute_sql result's columns (JSON: [{name, type, sql_type}]), so that a
-- reopened answer shows each column with the type the live one had.
ALTER TABLE tool_calls ADD COLUMN columns jsonb;
