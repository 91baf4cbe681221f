"""The held-out text every weight format and every cache is scored on (lessons 14 and 15, and `make bench`).

A few hundred tokens written for the series, which no lesson fits anything on: one text, so that a
format of the weights and a format of the cache stand on one quality-against-bytes picture.
"""

from __future__ import annotations

HELD_OUT_TEXT = (

    'The night train to the north leaves the capital at half past nine. Most of the passengers are '
    'students going home for the holidays, a few families with sleeping children, and workers who travel '
    'the same line every week. The carriages are old but clean. Each compartment has four narrow beds, a '
    'small table by the window and a lamp that never quite turns off. For the first hour the train runs '
    'through the suburbs, past warehouses, football fields and long rows of houses with their curtains '
    'drawn. Then the lights thin out, and there is nothing outside but dark fields and, now and then, a '
    'station where nobody gets on. An attendant walks through the corridor with a trolley of tea, '
    'biscuits and instant noodles. She has worked on this train for eleven years and can tell which '
    'passengers will sleep and which will sit up all night talking. Around midnight the train stops for '
    'twenty minutes at a junction in the mountains, where a second engine is added for the climb. Some '
    'passengers step down onto the platform to stretch their legs and look at the stars, which are '
    'brighter here than anywhere in the city. The air is cold and smells of pine and diesel. When the '
    'whistle blows, everyone climbs back on, and the train begins the long slow climb through the '
    'tunnels. By dawn it has crossed the pass and is running along a wide river valley. Mist lies on the '
    'water, and herons stand in the shallows without moving. The students wake up one by one, fold their '
    'blankets and queue for the small washroom at the end of the carriage. At seven the train reaches the '
    'last station of the line, a low building of grey stone with a clock that has been five minutes slow '
    'for as long as anyone can remember. Relatives wait on the platform with flasks of tea and warm '
    'coats. The attendant collects the sheets, counts the cups and writes her report. In the evening she '
    'will make the same journey in the other direction, with a new set of passengers and the same lamp '
    'that never quite turns off. She says she has never been bored on this train, because every night the '
    'passengers are different, and so are the stories they tell her over a cup of tea.'
)