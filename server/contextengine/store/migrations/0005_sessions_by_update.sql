-- ListSessions in google-adk's order, (last update, user, session id) oldest first, read as
-- ranges of these indexes (no sort, no scan past the page): one for an app's sessions of one user
-- and one for all of them. A session's update_time changes on every append, so each append
-- updates both entries: two small rows next to the event's own indexes.
CREATE INDEX sessions_by_user_update ON sessions (app_name, user_id, update_time, session_id);
CREATE INDEX sessions_by_update ON sessions (app_name, update_time, user_id, session_id);
