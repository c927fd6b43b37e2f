"""What a question asks for: a fact from inside the documents (the usual retrieval answer), or something about whole
documents — a summary, the key points, the outline, a comparison of two documents — or about the library itself (the
list of documents, the documents that mention a topic).

Plain rules, no model: the question (lower case, typos of the trigger words fixed, polite frames such as "could you
please" and length wishes such as "in 3 bullet points" set aside) must match one of the patterns below *as a whole*,
and the document it names must be one of the library's (rag_core.answer.doc_names). Anything else is a fact question,
so a question that only uses one of the words ("What does the summary on page 3 say about taxes?", "Who wrote the
executive summary?", "Summarize the section on overtime") stays a fact question: asking about a part of a document or a
topic is answered from the passages nearest to it. Measured on benchmarks/data/intents.jsonl (docs/whole-documents.md).
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from rag_core.answer.doc_names import DocLike, Reference, Resolved, close_words, resolve


class IntentKind(StrEnum):
    """What a question asks for."""

    FACT = "fact"  # something inside the documents: the passages nearest to the question answer it
    SUMMARY = "summary"  # "summarize this", "what is the report about", "tl;dr"
    KEY_POINTS = "key_points"  # "the main points / key takeaways / highlights of …"
    OUTLINE = "outline"  # "table of contents", "what sections does it have", "how is it structured"
    COMPARE = "compare"  # two (or more) documents side by side
    LIBRARY_LIST = "library_list"  # "what documents do I have"
    LIBRARY_TOPIC = "library_topic"  # "which of my documents mention X" (topic X)


@dataclass(frozen=True)
class Intent:
    """A question's intent, the documents it is about (in the library's ids) and, for LIBRARY_TOPIC, the topic."""

    kind: IntentKind
    doc_ids: tuple[str, ...] = ()
    topic: str | None = None
    reference: Reference = Reference.NONE  # how doc_ids were found (named, the chat's scope, the only document…)


FACT = Intent(IntentKind.FACT)

# --------------------------------------------------------------------------- normalising the question
_SPELLING = {
    "u": "you", "ur": "your", "r": "are", "pls": "please", "plz": "please", "pleas": "please", "whats": "what is",
    "what's": "what is", "wat": "what", "wht": "what", "abt": "about", "doc": "document", "docs": "documents",
    "gimme": "give me", "wanna": "want to", "summarise": "summarize", "summarised": "summarized", "it's": "it is",
    "organised": "organized", "organise": "organize", "i'd": "i would", "id": "i would", "im": "i am", "i'm": "i am",
    "thx": "thanks", "info": "information", "whole": "whole", "summarization": "summary", "summarisation": "summary",
    "tldr;": "tldr", "tl;dr": "tldr", "what're": "what are", "where's": "where is", "that's": "that is",
    "there's": "there is", "can't": "cannot", "pdf's": "pdfs", "theses": "these",
}
# Trigger words whose one-letter typos are fixed ("sumarize", "summery", "overveiw" is two: not fixed).
_TRIGGERS = ("summarize", "summary", "summaries", "overview", "takeaways", "highlights", "synopsis", "contents",
             "structure", "documents", "library", "compare", "differences", "mention", "mentions", "uploaded")
_LEAD = re.compile(
    r"^(?:hi|hey|hello|hiya|yo|ok|okay|so|well|and|now|please|kindly|quick question|question|thanks|thank you|just|"
    r"also|then|alright|right|great|docchat|"
    r"(?:can|could|would|will) you(?: please| kindly| just| maybe| quickly| now)*|would you mind|do you mind|"
    r"are you able to|is it possible to|i would (?:like|love)(?: you)? to|i want(?: you)? to|i need(?: you)? to|"
    r"help me(?: to)?|try to|go ahead and|let's|let us|(?:can|could|may) i (?:get|have|see|ask for)|"
    r"i would (?:like|love|appreciate)|i want|i need|i am looking for|let me (?:have|see|get)|give (?:me|us)|"
    r"get (?:me|us)|provide (?:me|us) with|send me|show (?:me|us)|do you have|briefly|in short|in brief|"
    r"in a nutshell|quickly|real quick|basically|overall|in a few words|in one sentence|in one line)\b\s*")
_COUNT = r"(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|few|a couple of|couple of|\d+)"
_AUDIENCE = (r"(?:manager|boss|team|colleagues?|client|clients|customers?|students?|class|child|kid|beginner|"
             r"layperson|layman|non-expert|newcomer|newbie|executives?|exec|board|meeting|presentation|email|slack|"
             r"report|notes|\d+[- ]year[- ]old|five[- ]year[- ]old)")
_TRAIL = re.compile(
    r"\s+(?:please|thanks|thank you|for me|for us|real quick|quickly|briefly|in short|in brief|in a nutshell|again|"
    r"now|if possible|if you can|if you could|right now|asap|so far|in total|overall|side by side|in detail|eli5|"
    rf"in {_COUNT}(?: short| brief| simple)? (?:sentences?|words?|lines?|paragraphs?|bullet points?|bullets?|points?|"
    r"pages?|minutes?|tweets?)|in (?:plain|simple|easy|layman's|laymans|lay|everyday|non-technical|nontechnical) "
    r"(?:english|terms|words|language)|as (?:a )?(?:bullet(?: point)?s?|list|bulleted list|short paragraph)|"
    r"in bullet(?: point)?s?(?: form)?|with bullet points|(?:like|as if) i am (?:five|5|a child|a kid|a beginner)|"
    rf"in (?:english|german|french|spanish)|for (?:my|our|a|an|the) {_AUDIENCE})$")


def normalise(question: str) -> str:
    """The question in lower case, its punctuation and spelling evened out and its polite frame set aside."""
    t = question.casefold().replace("’", "'").replace("‘", "'")
    t = re.sub(r"\btl\s*[;:,.]?\s*dr\b", "tldr", t)
    t = re.sub(r"[\"“”«»`*]", " ", t)
    t = re.sub(r"[?!;:()\[\],]+", " ", t)
    t = re.sub(r"\.+(?=\s|$)", " ", t)  # a full stop, not the dot of a file name or a number
    out: list[str] = []
    for w in t.split():
        w = _SPELLING.get(w, w)
        if len(w) >= 6 and w not in _TRIGGERS and w.isalpha():  # not an inflection: "document" stays
            w = next((trig for trig in _TRIGGERS if close_words(w, trig)
                      and not (trig.startswith(w) or w.startswith(trig))), w)
        out.append(w)
    t = " ".join(out)
    for _ in range(6):  # strip polite openings and closings, a few deep ("hi, could you please …, thanks")
        before = t
        t = _LEAD.sub("", t).strip()
        t = _TRAIL.sub("", t).strip()
        if t == before:
            break
    return t


# --------------------------------------------------------------------------- the patterns
_REF = r"(?P<ref>.+?)"
_DET = r"(?:the|a|an|some|your|my|this|that)"
_SUM_ADJ = (r"(?:short|shorter|brief|quick|concise|succinct|high[- ]level|general|overall|rough|basic|simple|"
            r"detailed|full|complete|comprehensive|executive|condensed|little|small|tiny|good|clear|fast|written|"
            r"one[- ](?:page|paragraph|line|sentence)|two[- ](?:page|paragraph|line|sentence)|"
            r"\d+[- ](?:word|line|sentence|page|paragraph)|bullet[- ]point(?:ed)?|bulleted|tldr|plain[- ]english)")
_SUM_NOUN = (r"(?:summary|summaries|overview|gist|synopsis|recap|rundown|run[- ]down|digest|precis|précis|"
             r"tldr|summation|sum[- ]up|(?:short|shorter|quick|condensed|abridged|tldr) version|cliff'?s? notes)")
_MAKE = (r"(?:give|give me|get|provide|write|write me|write up|make|make me|create|produce|generate|prepare|draft|"
         r"do|send|need|want|i would like|i want|i need)")
_GIVE = (r"(?:give|give me|get|provide|write|write me|write up|make|make me|create|produce|generate|prepare|draft|do|"
         r"send|show|tell me|what is|what was|need|want|i would like|i want|i need)")
_ABOUT_VERB = (r"(?:talk about|talks about|(?P<cover>cover|covers)|deal with|deals with|discuss|discusses|say|says|address|"
               r"addresses|contain|contains|describe|describes|explain|explains|go over|focus on|is saying|are saying)")
_MAIN = r"(?:main|central|core|general|overall|key|big|basic|primary|underlying|principal|chief)"
_SUMMARY = [
    rf"(?:summarize|sum up|recap|tldr|condense|digest)(?: (?:of|on))?(?: {_REF})?",
    rf"(?:explain|describe|brief me on|fill me in on|walk me through|run me through|take me through|go over|"
    rf"go through|break down|paraphrase) {_REF}",
    rf"sum {_REF} up",
    rf"(?:{_GIVE} )?(?:{_DET} )?(?:{_SUM_ADJ} )*{_SUM_NOUN}(?: (?:of|for|on|about|from|regarding) {_REF})?",
    rf"(?:(?:{_MAKE} )(?:{_DET} )?|(?:{_MAKE} )?(?:a|an) )(?:{_SUM_ADJ} )*(?:abstract|brief)"
    rf"(?: (?:of|for|on|about|from|regarding) {_REF})?",  # "an abstract of X" is written; "the abstract of X" is in X
    rf"(?:{_GIVE} )?(?:{_DET} )?{_REF} (?:{_SUM_ADJ} )*{_SUM_NOUN}",
    rf"what (?:is|was|are|were) {_REF}(?: mainly| mostly| generally| actually| really| basically| even| all| "
    rf"roughly| broadly)? about",
    rf"what (?:does|do|did) {_REF}(?: mainly| mostly| generally| actually| really| basically)? {_ABOUT_VERB}",
    rf"(?:tell me|explain|describe|say|show me|tell us) what {_REF} (?:is|was|are|were)(?: mainly| mostly| really)? "
    rf"about",
    rf"(?:tell me|explain|describe|say|show me|tell us) what {_REF} (?:covers|contains|says|discusses|deals with|"
    rf"talks about|is saying|explains|describes|is on)",
    rf"tell (?:me|us)(?: a bit| a little| something| briefly| quickly| in short)? about {_REF}",
    rf"what is (?:the )?(?:{_MAIN} )?(?:idea|point|message|topic|subject|theme|purpose|gist|story|argument|premise|"
    rf"thrust|focus|aim|goal|finding|conclusion|lesson) (?:of|in|behind|from) {_REF}",
    rf"what is {_REF}(?:'s|s') (?:{_MAIN} )?(?:idea|point|message|topic|subject|theme|purpose|gist|argument)",
    rf"what (?:is|are) {_REF}(?: actually| really| basically| even)? (?:saying|trying to (?:say|show|tell (?:me|us)|argue|"
    rf"prove|get across)|getting at|arguing)",
]
_KP_ADJ = (r"(?:key|main|most important|important|major|central|principal|core|essential|top|primary|biggest|chief|"
           r"crucial|critical|significant|salient|notable|headline|\d+|one|two|three|four|five|six|seven|eight|nine|"
           r"ten|few|couple of)")
_KP_NOUN = (r"(?:points|ideas|findings|messages|conclusions|contributions|lessons|insights|themes|arguments|facts|"
            r"things|results|claims|takeaways?|take[- ]aways?|highlights|learnings|outcomes|recommendations|issues)")
_KP_VERB = (r"(?:what are|what were|what is|list|list out|give|give me|tell me|show me|name|enumerate|highlight|"
            r"bullet|bullet[- ]point|bulletize|jot down|"
            r"extract|pull out|pick out|summarize|sum up|recap|get|provide|write down|write|note|identify|"
            r"point out|i want|i need)")
_KP_PHRASE = rf"(?:(?:{_KP_ADJ} )+{_KP_NOUN}|takeaways?|take[- ]aways?|highlights|talking points)"
_KEY_POINTS = [
    rf"(?:{_KP_VERB} )?(?:(?:the|all the|all|some|your|its) )?{_KP_PHRASE}(?: (?:of|from|in|for) {_REF})?",
    rf"(?:{_KP_VERB} )?(?:a list of|a bullet list of|a bulleted list of|bullet points of|bullets of|a list with) "
    rf"(?:the )?{_KP_PHRASE}(?: (?:of|from|in) {_REF})?",
    rf"what (?:should|do|must|can|would) (?:i|we|one|you) (?:take away|take|learn|remember|retain|get) "
    rf"(?:away )?from {_REF}",
    rf"what (?:stands|stand|jumps|jump) out (?:in|from|about|of) {_REF}",
]
_TOC = (r"(?:table of contents|contents|toc|outline|structure|layout|organization|sections|chapters|headings|"
        r"section headings|section titles|chapter titles|chapter headings|headers|parts|slides|sheets|tabs|"
        r"slide titles|sheet names|list of (?:sections|chapters|headings|slides|sheets|contents))")
_TOC_PL = r"(?:sections|chapters|headings|parts|slides|sheets|tabs|topics|subjects|themes|areas)"
_OUTLINE = [
    rf"(?:(?:what is|what are|what were|give me|give|show me|show|list|display|print|tell me|get|provide|generate|"
    rf"create|make|extract|i want|i need|describe|explain|can i see) )?(?:(?:the|an|a|all the|all) )?"
    rf"(?:(?:full|complete|overall|basic|rough|high[- ]level|main|detailed|general|chapter|section) )?{_TOC}"
    rf"(?: (?:of|in|for|from) {_REF})?",
    rf"(?:what|which) {_TOC_PL} (?:does|do|did) {_REF} (?:have|contain|include|cover|consist of|comprise|discuss|"
    rf"talk about|address|deal with)",
    rf"(?:what|which) {_TOC_PL} (?:are|is) (?:there )?(?:in|of|within|inside|covered in|covered by|discussed in|"
    rf"included in) {_REF}",
    rf"how (?:is|was|are) {_REF} (?:structured|organized|laid out|divided|broken down|broken up|arranged|split up|"
    rf"split|set out|built up|put together)",
    rf"outline {_REF}",
]
_PAIR = r"(?P<pair>.+)"
_COMPARE = [
    rf"(?:compare|contrast|compare and contrast|diff)(?: between)? {_PAIR}",
    rf"(?:(?:what is|what are|what were|tell me|show me|explain|list|give me|describe|highlight|summarize|find|spot|"
    rf"identify|point out) )?(?:the )?(?:(?:main|key|biggest|major|important|most important|notable|significant) )?"
    rf"(?:differences?|similarities|distinctions?|contrasts?|commonalities|overlaps?|changes)"
    rf"(?: and (?:similarities|differences))? (?:between|of|across|among) {_PAIR}",
    rf"(?:a |an )?(?:side[- ]by[- ]side |quick |short |detailed )?comparison (?:of|between) {_PAIR}",
    r"how (?:does|do|did|is|are) (?P<a>.+?) (?:differ from|compare to|compare with|compare against|stack up against|"
    r"measure up to|contrast with|different from|similar to|differ with)(?: the)? (?P<b>.+)",
    rf"how (?:do|are|does|did) {_PAIR} (?:compare|differ|contrast|different|similar|stack up)"
    rf"(?: to each other| with each other| from each other)?",
    rf"what (?:do|does|did) {_PAIR} have in common",
    r"(?P<a>.+?) (?:vs|versus|vs\.|compared to|compared with) (?P<b>.+)",
]
_SEP = re.compile(r" (?:and|with|to|against|vs|versus|vs\.|or|&) ")
_L_NOUN = (r"(?:documents|files|pdfs|papers|sources|reports|uploads|items|texts|articles|books|things|stuff|materials|"
           r"document|file|pdf|paper)")
_LIBRARY_LIST = [
    rf"(?:(?:tell me|show me|let me know|do you know|list) )?(?:what|which)(?: kinds? of| types? of| sort of)? "
    rf"{_L_NOUN} (?:do i have|have i got|have i (?:uploaded|added|shared|saved|stored|indexed|given you|imported|"
    r"provided)|did i (?:upload|add|share|give you|send|import|provide)|do we have|have we (?:uploaded|added)|"
    r"are (?:there|available|loaded|uploaded|indexed|stored|saved|present|here|in here)|"
    r"are (?:in|on) (?:my|the|this|our) (?:library|collection|workspace|account|chat|system|database)|"
    r"have been (?:added|uploaded|loaded|indexed|shared|imported)|can you (?:see|access|read|search|use)|"
    r"do you (?:have|see|know about|know)|you have(?: access to)?|are you (?:using|working with|able to see))"
    r"(?: (?:access to|right now|currently|here|already|available|in my library))?"
    r"(?: (?:today|yesterday|recently|last (?:week|month|time)|this (?:week|month)|earlier))?",
    rf"(?:(?:list|show|display|tell me|enumerate|name|print|what are) )?(?:(?:a|the) list of |all )?(?:of )?"
    rf"(?:my|our|the|your) (?:{_L_NOUN}|library|uploads|uploaded (?:files|documents)|collection)"
    r"(?: (?:that )?(?:you have(?: access to)?|i (?:have )?(?:uploaded|added)|in (?:my|the) library|available|here))?",
    r"(?:what is in|what do (?:i|we) have in|what is on|show me what is in) (?:my|the|our) (?:library|collection|"
    r"workspace)",
    r"what (?:have|did) (?:i|we) (?:uploaded|upload|added|add|shared|share|given you|give you)(?: here| to you| already)?",
    rf"how many {_L_NOUN} (?:do i have|have i (?:uploaded|added)|did i upload|are (?:there|in my library|in the "
    r"library|loaded|uploaded)|do you have|can you see)",
    r"what (?:do|can) you have(?: access to)?|what (?:can|do) you see",
    rf"(?:do|have) (?:i|we) (?:have |got )?any {_L_NOUN}(?: (?:uploaded|added|loaded|saved|in (?:my|the) library|"
    r"here|at all|yet))?",
    r"(?:list|show|tell me|give me) (?:me )?(?:everything|all|what is|what i have) (?:in|on) (?:my|the|our) "
    r"(?:library|collection|workspace)",
    rf"(?:(?:list|show|tell me|give me|what are) )?(?:the )?(?:titles|names) of (?:all )?(?:of )?(?:my|the|our) "
    rf"(?:{_L_NOUN}|uploads)",
    r"what is (?:uploaded|loaded|indexed)(?: here| so far)?",
]
_T_NOUN = r"(?:documents?|files?|pdfs?|papers?|sources?|reports?|uploads?|texts?|articles?|books?|items?)"
_T_PLURAL = r"(?:documents|files|pdfs|papers|sources|reports|uploads|texts|articles|books|notes)"
_T_VERB = (r"(?:mentions?|mentioned|mentioning|talks? about|talked about|discuss(?:es)?|discussed|covers?|covered|"
           r"refers? to|referred to|deals? with|contains?|contained|includes?|included|(?:is|are|was|were) about|"
           r"says? (?:anything |something |stuff |things )?about|said (?:anything |something )?about|"
           r"(?:has|have|had) (?:anything|something|info|information|content|stuff|data|details|material|passages?|"
           r"sections?) (?:on|about|regarding|concerning)|touch(?:es)? on|address(?:es)?|explains?|describes?|"
           r"features?|references?|cites?|involves?|relates? to|(?:is|are) related to|speaks? (?:about|of)|"
           r"focus(?:es)? on|(?:is|are) relevant to)")
_TOPIC = r"(?P<topic>.+)"
_PASSIVE = r"(?:mentioned|discussed|covered|referenced|talked about|described|explained|addressed|cited|named|found)"
_LIBRARY_TOPIC = [
    rf"(?:in )?(?:which|what)(?: ones)?(?: of)? (?:(?:my|the|these|our|your|all my|all the|all) )?{_T_NOUN}"
    rf"(?: (?:in|from) (?:my|the) library| (?:i|we) (?:have|uploaded))? (?:that |which )?{_T_VERB} {_TOPIC}",
    rf"(?:(?:do|does|did|are there|is there|have i got|do i have|got) )?(?:any|anything)(?: of)? "
    rf"(?:(?:my|the|these|our) )?{_T_NOUN}(?: (?:in|from) my library)? (?:that |which )?"
    rf"(?:{_T_VERB}|about|on|regarding|concerning|mentioning|covering|discussing|with) {_TOPIC}",
    rf"what (?:does|do|did) (?:my|our|your) library (?:say|tell me|have to say|contain|have|know|mention) "
    rf"(?:about|on|regarding|concerning|of) {_TOPIC}",
    rf"what (?:does|do|did) (?:my|all my|all the|the|these|our|your) {_T_PLURAL} (?:say|tell me|tell us|have to say|"
    rf"contain|have|know|mention) (?:about|on|regarding|concerning|of) {_TOPIC}",
    rf"(?:(?:find|search|show|list|get|look for|search for|look up|locate|pull up|which are|what are) )?(?:me )?"
    rf"(?:all )?(?:(?:the|my|any) )?{_T_NOUN} (?:that |which )?(?:{_T_VERB}|about|on|regarding|concerning|"
    rf"mentioning|covering|discussing|referencing|containing|related to|relating to|dealing with|talking about) "
    rf"{_TOPIC}",
    rf"(?:search|look|check|scan|go through|look through|search through)(?: in| through| across)? (?:all )?(?:of )?"
    rf"(?:my|the|our) (?:library|{_T_PLURAL}|collection|uploads)(?: for| to find) {_TOPIC}",
    rf"(?:search|look) for (?P<topic>.+?) (?:in|across|throughout) (?:all )?(?:of )?(?:my|the|our) "
    rf"(?:library|{_T_PLURAL})",
    rf"(?:find|look up) (?P<topic>.+?) in (?:all )?(?:of )?(?:my|the) (?:library|{_T_PLURAL})",
    rf"(?:in )?(?:which|what)(?: of (?:my|the))? {_T_NOUN} (?:is|are|was|were) (?P<topic>.+?) {_PASSIVE}",
    rf"(?:in )?(?:which|what)(?: of (?:my|the))? {_T_NOUN} (?:can|do|could) (?:i|you|we) (?:find|see|read about) "
    rf"{_TOPIC}",
    rf"where (?:in|across|among) (?:all )?(?:my|the|our) (?:{_T_PLURAL}|library) (?:is|are|was|were) "
    rf"(?P<topic>.+?) {_PASSIVE}",
    rf"where (?:is|are) (?P<topic>.+?) {_PASSIVE} (?:in|across) (?:my|the|our) (?:{_T_PLURAL}|library)",
    rf"(?:is|are|was|were) (?P<topic>.+?) {_PASSIVE} (?:in|by|anywhere in) (?:any|some|one)(?: of)? "
    rf"(?:(?:my|the|these) )?{_T_NOUN}",
    rf"(?:do|does) (?:my|the|all my|any of my) (?:library|{_T_PLURAL}) (?:mention|contain|have anything on|cover|"
    rf"say anything about|talk about|discuss) {_TOPIC}",
    rf"(?:what|which) {_T_NOUN} (?:are there|is there|do i have|have i got|do we have|do you have) (?:on|about|"
    rf"regarding|concerning|covering|mentioning|discussing) {_TOPIC}",
    rf"(?:do|did) (?:i|we|you) (?:have|got) (?:anything|something|any {_T_NOUN}|a {_T_NOUN}) (?:on|about|regarding|"
    rf"concerning|mentioning|covering|discussing) {_TOPIC}",
    rf"(?:what|which) (?:have|did) (?:i|we) (?:got|get|uploaded|upload|added|add) (?:on|about|regarding|concerning) "
    rf"{_TOPIC}",
    rf"(?:is|are) there (?:a|any|some) {_T_NOUN} (?:on|about|regarding|concerning|covering|mentioning|discussing|"
    rf"that (?:mentions?|covers?|discuss(?:es)?)) {_TOPIC}",
    rf"(?:(?:is there|do i have|have i got|do we have) )?(?:anything|something) (?:on|about|regarding|concerning) "
    rf"(?P<topic>.+?) in (?:any of )?(?:my|the|our) (?:library|{_T_PLURAL})",
]


def _compile(patterns: list[str]) -> list[re.Pattern[str]]:
    return [re.compile(p) for p in patterns]


_GRAMMAR: tuple[tuple[IntentKind, list[re.Pattern[str]]], ...] = (
    (IntentKind.LIBRARY_LIST, _compile(_LIBRARY_LIST)),
    (IntentKind.LIBRARY_TOPIC, _compile(_LIBRARY_TOPIC)),
    (IntentKind.COMPARE, _compile(_COMPARE)),
    (IntentKind.OUTLINE, _compile(_OUTLINE)),
    (IntentKind.KEY_POINTS, _compile(_KEY_POINTS)),
    (IntentKind.SUMMARY, _compile(_SUMMARY)),
)
_NAME = re.compile(r"[^\W_]+")
_INSURED = re.compile(r"\b(?:insurance|insurer|insured|policy|policies|warranty|guarantee|coverage|cover|assurance|"
                      r"protection plan|benefits? plan)\b")
_TOPIC_LEAD = re.compile(r"^(?:the (?:word|words|term|terms|phrase|name|keyword|topic|subject|idea|concept) |"
                         r"(?:word|term|phrase|keyword|topic) )")
_TOPIC_TRAIL = re.compile(r"\s+(?:at all|anywhere|in them|in my library|in any of them|in any of my documents)$")


# --------------------------------------------------------------------------- classifying
def _topic(text: str, question: str) -> str | None:
    """The topic as the question wrote it (its case kept), without "the word" before it or quotes around it."""
    topic = _TOPIC_TRAIL.sub("", _TOPIC_LEAD.sub("", text.strip())).strip(" '\"")
    topic = re.sub(r"^(?:the|a|an|any|some) ", "", topic)
    if not topic:
        return None
    found = re.search(r"\s+".join(re.escape(w) for w in topic.split()), question, re.IGNORECASE)
    return found.group() if found else topic


def _pair(text: str, documents: Sequence[DocLike], scope: Sequence[str] | None,
          names: frozenset[str]) -> Resolved | None:
    """Two or more documents named in `text`: "A and B", "A with B", or one plural phrase ("the two budgets")."""
    for sep in _SEP.finditer(text):
        first = resolve(text[:sep.start()], documents, scope, names)
        second = resolve(text[sep.end():], documents, scope, names)
        if first and second and first.doc_ids and second.doc_ids and Reference.ALL not in (
                first.reference, second.reference):  # "this" must be one document, not the whole library
            ids = tuple(dict.fromkeys((*first.doc_ids, *second.doc_ids)))
            if len(ids) >= 2:
                return Resolved(ids, Reference.NAMED)
    whole = resolve(text, documents, scope, names)
    if whole is not None and len(whole.doc_ids) >= 2 and whole.reference is not Reference.NAMED:
        return whole  # "these documents", "them", "both": all in scope
    words = text.split()
    if whole is not None and len(whole.doc_ids) >= 2 and any(w in ("two", "both", "these", "all") for w in words):
        return whole  # "the two budgets" (named by a shared title word)
    return None


def _build(kind: IntentKind, m: re.Match[str], question: str, documents: Sequence[DocLike],
           scope: Sequence[str] | None) -> Intent | None:
    """The intent a matched pattern stands for, or None when the documents it names are not in the library."""
    groups = m.groupdict()
    names = frozenset(w.casefold() for w in _NAME.findall(question)
                      if (w.isupper() and len(w) >= 2) or any(c.isdigit() for c in w))
    if kind is IntentKind.LIBRARY_LIST:
        return Intent(kind)
    if kind is IntentKind.LIBRARY_TOPIC:
        topic = _topic(groups["topic"], question)
        return Intent(kind, topic=topic) if topic else None
    if kind is IntentKind.COMPARE:
        if groups.get("pair") is not None:
            got = _pair(groups["pair"], documents, scope, names)
        else:
            got = _pair(f"{groups['a']} and {groups['b']}", documents, scope, names)
        if got is None or len(got.doc_ids) < 2:
            return None
        return Intent(kind, got.doc_ids, reference=got.reference)
    ref = groups.get("ref")
    got = resolve(ref or "", documents, scope, names)
    if got is None:
        return None
    if groups.get("cover") and _coverage(ref or "", got.doc_ids, documents):
        return None  # "what does this policy cover?" asks what it insures, not what it is about
    return Intent(kind, got.doc_ids, reference=got.reference)


def _coverage(ref: str, doc_ids: Sequence[str], documents: Sequence[DocLike]) -> bool:
    """Is "cover" meant as insurance cover: the phrase or one of the documents' titles is about a policy?"""
    titles = " ".join(d.title for d in documents if d.doc_id in set(doc_ids))
    return bool(_INSURED.search(f"{ref} {titles}".casefold()))


def classify(question: str, documents: Sequence[DocLike], scope: Sequence[str] | None = None) -> Intent:
    """What `question` asks for, and which of `documents` (the library's listing) it means; `scope` is the ids of the
    documents selected in the chat (None or empty: the whole library). Anything not clearly about whole documents or
    the library is FACT."""
    text = normalise(question)
    if not text:
        return FACT
    for kind, patterns in _GRAMMAR:
        for pattern in patterns:
            m = pattern.fullmatch(text)
            if m is None:
                continue
            intent = _build(kind, m, question, documents, scope)
            if intent is not None:
                return intent
    return FACT
