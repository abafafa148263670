// Code generated from testdata/github/api-pulls-get.json (head.repo and user); DO NOT EDIT.

package githubfake

// repoURLFields are the *_url fields of a repository object: key and the
// suffix after the repository's API URL, as in the fixture.
var repoURLFields = [][2]string{
	{"archive_url", "/{archive_format}{/ref}"},
	{"assignees_url", "/assignees{/user}"},
	{"blobs_url", "/git/blobs{/sha}"},
	{"branches_url", "/branches{/branch}"},
	{"collaborators_url", "/collaborators{/collaborator}"},
	{"comments_url", "/comments{/number}"},
	{"commits_url", "/commits{/sha}"},
	{"compare_url", "/compare/{base}...{head}"},
	{"contents_url", "/contents/{+path}"},
	{"contributors_url", "/contributors"},
	{"deployments_url", "/deployments"},
	{"downloads_url", "/downloads"},
	{"events_url", "/events"},
	{"forks_url", "/forks"},
	{"git_commits_url", "/git/commits{/sha}"},
	{"git_refs_url", "/git/refs{/sha}"},
	{"git_tags_url", "/git/tags{/sha}"},
	{"issue_comment_url", "/issues/comments{/number}"},
	{"issue_events_url", "/issues/events{/number}"},
	{"issues_url", "/issues{/number}"},
	{"keys_url", "/keys{/key_id}"},
	{"labels_url", "/labels{/name}"},
	{"languages_url", "/languages"},
	{"merges_url", "/merges"},
	{"milestones_url", "/milestones{/number}"},
	{"notifications_url", "/notifications{?since,all,participating}"},
	{"pulls_url", "/pulls{/number}"},
	{"releases_url", "/releases{/id}"},
	{"stargazers_url", "/stargazers"},
	{"statuses_url", "/statuses/{sha}"},
	{"subscribers_url", "/subscribers"},
	{"subscription_url", "/subscription"},
	{"tags_url", "/tags"},
	{"teams_url", "/teams"},
	{"trees_url", "/git/trees{/sha}"},
	{"hooks_url", "/hooks"},
}

// userURLFields are the *_url fields of a user object after the user's
// API URL, as in the fixture.
var userURLFields = [][2]string{
	{"followers_url", "/followers"},
	{"following_url", "/following{/other_user}"},
	{"gists_url", "/gists{/gist_id}"},
	{"starred_url", "/starred{/owner}{/repo}"},
	{"subscriptions_url", "/subscriptions"},
	{"organizations_url", "/orgs"},
	{"repos_url", "/repos"},
	{"events_url", "/events{/privacy}"},
	{"received_events_url", "/received_events"},
}
