-- The view shows which instance wrote each event (for an outcome recovery
-- gave a lost instance's call, the lost one), as every gateway replica's
-- responses name it in their Toolwire-Instance header: an operator
-- follows a session or a call across the replicas.
CREATE OR REPLACE VIEW toolwire.audit AS
	SELECT seq, convert_from(line, 'UTF8')::jsonb AS event, instance FROM toolwire.audit_events;
