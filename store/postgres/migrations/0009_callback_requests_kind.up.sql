-- 0009: callback request ids are deduplicated per kind. Keyed on request_id
-- alone, a deploy callback "42" after an approval callback "42" was answered
-- DUPLICATE and lost: the approval system and the deploy system number their
-- requests independently.
ALTER TABLE callback_requests DROP CONSTRAINT callback_requests_pkey;
ALTER TABLE callback_requests ADD PRIMARY KEY (kind, request_id);
