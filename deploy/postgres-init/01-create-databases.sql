-- Runs once, when the postgres container initialises an empty data volume
-- (docker-entrypoint-initdb.d). Each docchat service owns its own database.
-- The services would also create a missing database themselves when the role may, but doing it
-- here means they never race each other for CREATE DATABASE on first start.
-- `\gexec` runs the generated statement only when the database does not exist yet, so the
-- script is safe to run again by hand.

SELECT 'CREATE DATABASE docchat_admin OWNER docchat'
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'docchat_admin')\gexec
SELECT 'CREATE DATABASE docchat_ingest OWNER docchat'
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'docchat_ingest')\gexec
SELECT 'CREATE DATABASE docchat_chat OWNER docchat'
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'docchat_chat')\gexec
SELECT 'CREATE DATABASE docchat_agent OWNER docchat'
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'docchat_agent')\gexec
SELECT 'CREATE DATABASE docchat_scheduler OWNER docchat'
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'docchat_scheduler')\gexec

-- ingest-service stores chunk embeddings with pgvector (HNSW index). The extension ships in the
-- pgvector/pgvector image; creating it here as the superuser means the service's migrations do
-- not need superuser rights for it.
\connect docchat_ingest
CREATE EXTENSION IF NOT EXISTS vector;
